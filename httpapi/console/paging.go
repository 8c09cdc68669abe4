package console

import (
	"net/http"
	"strconv"
)

// pageSize is the rows of a page when the request asks for none, and
// maxPageSize the most it may ask for.
const (
	pageSize    = 100
	maxPageSize = 1000
)

// pager is where a listing page starts and how long it is, read from the
// query parameters from and limit.
type pager struct {
	From, Limit int
	Total       int // rows in all pages; -1 when unknown
	Next        int // From of the next page; 0 when this is the last
	// searched pages skip rows that do not match at an unknown rate, so
	// the previous page's start is not known: the link goes to the first.
	searched bool
}

// readPager reads from and limit; bad values are an error message.
func readPager(r *http.Request) (pager, string) {
	p := pager{Limit: pageSize, Total: -1}
	q := r.URL.Query()
	if s := q.Get("from"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, "from must be a number of rows, 0 or more"
		}
		p.From = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > maxPageSize {
			return p, "limit must be a number from 1 to " + strconv.Itoa(maxPageSize)
		}
		p.Limit = n
	}
	return p, ""
}

// slice returns the page of rows and sets Total and Next.
func pageOf[T any](p *pager, rows []T) []T {
	p.Total = len(rows)
	if p.From >= len(rows) {
		return nil
	}
	end := min(len(rows), p.From+p.Limit)
	if end < len(rows) {
		p.Next = end
	}
	return rows[p.From:end]
}

// link returns the query string of the page starting at from, with the
// request's other parameters kept.
func pageLink(r *http.Request, from int) string {
	q := r.URL.Query()
	q.Set("from", strconv.Itoa(from))
	return "?" + q.Encode()
}

// Prev is the From of the previous page, -1 on the first.
func (p pager) Prev() int {
	if p.From == 0 {
		return -1
	}
	if p.searched {
		return 0
	}
	return max(0, p.From-p.Limit)
}

// links are the query strings of a listing's previous and next pages,
// "" where there is none.
type links struct{ Prev, Next string }

func pageLinks(r *http.Request, p pager) links {
	var l links
	if p.Prev() >= 0 {
		l.Prev = pageLink(r, p.Prev())
	}
	if p.Next > 0 {
		l.Next = pageLink(r, p.Next)
	}
	return l
}
