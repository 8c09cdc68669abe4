package queen

import (
	"sort"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
)

// Holes: offsets are assigned without gaps, but [Broker.DeleteMessage]
// removes single messages, leaving offsets in [first, next) that hold
// nothing. A partition keeps them as sorted runs, in memory and in its
// stored metadata, so that a cursor steps over them without reading
// storage (a claim never covers only deleted offsets), a batch counts only
// stored messages, and lag counts only what is left to read. Retention
// removes whole prefixes: it moves first and forgets the runs below it.
// Holes are rare (an operator deleting messages one by one), so a
// partition without any pays one nil-map lookup.

// holeRun is a run of deleted offsets [from, end).
type holeRun struct{ from, end int64 }

// holeSet is a partition's deleted offsets: sorted, disjoint runs that
// never touch (neighbours are merged), and how many offsets they cover.
type holeSet struct {
	runs []holeRun
	n    int64
}

// holeSet returns p's holes, nil when it has none.
func (p *partition) holeSet() *holeSet {
	if p.q.holes == nil {
		return nil
	}
	return p.q.holes[p]
}

// holes counts the deleted offsets in [first, next).
func (p *partition) holes() int64 {
	if hs := p.holeSet(); hs != nil {
		return hs.n
	}
	return 0
}

// setHoleSet installs hs as p's holes (none when hs is empty).
func (p *partition) setHoleSet(hs *holeSet) {
	if hs == nil || hs.n == 0 {
		delete(p.q.holes, p)
		return
	}
	if p.q.holes == nil {
		p.q.holes = make(map[*partition]*holeSet)
	}
	p.q.holes[p] = hs
}

// at returns the index of the first run ending after off.
func (hs *holeSet) at(off int64) int {
	return sort.Search(len(hs.runs), func(i int) bool { return hs.runs[i].end > off })
}

// addHole records off as deleted; false if it already was.
func (p *partition) addHole(off int64) bool {
	hs := p.holeSet()
	if hs == nil {
		hs = &holeSet{}
	}
	i := hs.at(off)
	if i < len(hs.runs) && hs.runs[i].from <= off {
		return false
	}
	joinsPrev := i > 0 && hs.runs[i-1].end == off
	joinsNext := i < len(hs.runs) && hs.runs[i].from == off+1
	switch {
	case joinsPrev && joinsNext:
		hs.runs[i-1].end = hs.runs[i].end
		hs.runs = append(hs.runs[:i], hs.runs[i+1:]...)
	case joinsPrev:
		hs.runs[i-1].end = off + 1
	case joinsNext:
		hs.runs[i].from = off
	default:
		hs.runs = append(hs.runs, holeRun{})
		copy(hs.runs[i+1:], hs.runs[i:])
		hs.runs[i] = holeRun{off, off + 1}
	}
	hs.n++
	p.setHoleSet(hs)
	return true
}

// trimHoles forgets the holes below first (retention moved past them).
func (p *partition) trimHoles(first int64) {
	hs := p.holeSet()
	if hs == nil {
		return
	}
	i := hs.at(first)
	for _, r := range hs.runs[:i] {
		hs.n -= r.end - r.from
	}
	hs.runs = hs.runs[i:]
	if len(hs.runs) > 0 && hs.runs[0].from < first {
		hs.n -= first - hs.runs[0].from
		hs.runs[0].from = first
	}
	p.setHoleSet(hs)
}

// skipHoles returns off, or the end of the run of deleted offsets it
// falls in.
func (p *partition) skipHoles(off int64) int64 {
	hs := p.holeSet()
	if hs == nil {
		return off
	}
	if i := hs.at(off); i < len(hs.runs) && hs.runs[i].from <= off {
		return hs.runs[i].end
	}
	return off
}

// storedFrom counts the stored messages at or after off, off >= first.
func (p *partition) storedFrom(off int64) int64 {
	n := p.next - off
	if hs := p.holeSet(); hs != nil {
		for _, r := range hs.runs[hs.at(off):] {
			n -= r.end - max(r.from, off)
		}
	}
	return max(n, 0)
}

// span returns the end of the range from off holding up to n stored
// messages, capped at next, and how many it holds. off must not be
// deleted (see skipHoles). Only the runs inside the range are looked at.
func (p *partition) span(off, n int64) (end, stored int64) {
	end = off + n
	if hs := p.holeSet(); hs != nil {
		for i := hs.at(off); i < len(hs.runs) && hs.runs[i].from < end; i++ {
			end += hs.runs[i].end - hs.runs[i].from
		}
	}
	if end <= p.next {
		return end, n
	}
	return p.next, p.storedBetween(off, p.next)
}

// storedBetween counts the stored messages in [from, end).
func (p *partition) storedBetween(from, end int64) int64 {
	n := end - from
	if hs := p.holeSet(); hs != nil {
		for i := hs.at(from); i < len(hs.runs) && hs.runs[i].from < end; i++ {
			n -= min(hs.runs[i].end, end) - max(hs.runs[i].from, from)
		}
	}
	return n
}

// lastStoredBefore returns the offset of the newest stored message below
// end (end-1 unless it was deleted).
func (p *partition) lastStoredBefore(end int64) int64 {
	off := end - 1
	if hs := p.holeSet(); hs != nil {
		if i := hs.at(off); i < len(hs.runs) && hs.runs[i].from <= off {
			return hs.runs[i].from - 1
		}
	}
	return off
}

// holeRunsMeta flattens p's runs for its stored metadata.
func (p *partition) holeRunsMeta() []int64 {
	hs := p.holeSet()
	if hs == nil {
		return nil
	}
	out := make([]int64, 0, 2*len(hs.runs))
	for _, r := range hs.runs {
		out = append(out, r.from, r.end)
	}
	return out
}

// loadHoles restores p's holes from its stored metadata. Metadata that
// counts holes without listing them (written before the runs were
// stored), or lists them wrong, is repaired from the message keys.
func (b *Broker) loadHoles(txn *badger.Txn, p *partition, m *partitionMeta) error {
	if m.Holes <= 0 {
		return nil
	}
	hs := &holeSet{}
	ok := len(m.HoleRuns)%2 == 0
	for i := 0; ok && i < len(m.HoleRuns); i += 2 {
		r := holeRun{m.HoleRuns[i], m.HoleRuns[i+1]}
		ok = r.from >= p.first && r.end > r.from && r.end <= p.next && (len(hs.runs) == 0 || hs.runs[len(hs.runs)-1].end < r.from)
		hs.runs = append(hs.runs, r)
		hs.n += r.end - r.from
	}
	if ok && hs.n == m.Holes {
		p.setHoleSet(hs)
		return nil
	}
	hs = &holeSet{}
	next := p.first
	note := func(end int64) {
		if end > next {
			hs.runs = append(hs.runs, holeRun{next, end})
			hs.n += end - next
		}
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: keys.MessagePrefix(p.pid)})
	defer it.Close()
	for it.Seek(keys.MessageKey(p.pid, p.first)); it.Valid(); it.Next() {
		_, off, ok := keys.DecodeMessageKey(it.Item().Key())
		if !ok || off >= p.next {
			break
		}
		note(off)
		next = off + 1
	}
	note(p.next)
	p.setHoleSet(hs)
	return nil
}
