package queen

// chain is an intrusive doubly linked FIFO: each element holds its own
// links, so adding and removing allocate nothing and removal is O(1).
// It keeps a group's ready partitions (cursor.go) and a list of waiting
// pops (wait.go). The zero chain is empty. Not safe for concurrent use:
// its owner's lock guards it.
type chain[T any, P linked[T]] struct {
	head, tail P
	n          int
}

// linked is a pointer to an element of a chain, which gives its links.
type linked[T any] interface {
	*T
	links() *links[T]
}

// links are an element's place in its chain.
type links[T any] struct {
	prev, next *T
}

// pushBack appends x, which must be in no chain.
func (l *chain[T, P]) pushBack(x P) {
	lx := x.links()
	lx.prev, lx.next = l.tail, nil
	if l.tail != nil {
		l.tail.links().next = x
	} else {
		l.head = x
	}
	l.tail = x
	l.n++
}

// remove takes x, which must be in l, out of l.
func (l *chain[T, P]) remove(x P) {
	lx := x.links()
	if lx.prev != nil {
		P(lx.prev).links().next = lx.next
	} else {
		l.head = lx.next
	}
	if lx.next != nil {
		P(lx.next).links().prev = lx.prev
	} else {
		l.tail = lx.prev
	}
	lx.prev, lx.next = nil, nil
	l.n--
}
