package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table is a text table that fits ctlMaxWidth columns: the columns marked
// as names give up width, the widest first, and their cells are cut with
// "…". Numbers and times are never cut.
type table struct {
	head []string
	// names marks the columns that may be cut; right marks the columns
	// aligned right (numbers).
	names, right []bool
	rows         [][]string
}

// newTable starts a table. A heading ending in "<" is a name column that
// may be cut, one ending in ">" is aligned right; the marks are dropped.
func newTable(head ...string) *table {
	t := &table{head: make([]string, len(head)), names: make([]bool, len(head)), right: make([]bool, len(head))}
	for i, h := range head {
		switch {
		case strings.HasSuffix(h, "<"):
			t.names[i], h = true, strings.TrimSuffix(h, "<")
		case strings.HasSuffix(h, ">"):
			t.right[i], h = true, strings.TrimSuffix(h, ">")
		}
		t.head[i] = h
	}
	return t
}

// add appends a row; values are formatted with %v.
func (t *table) add(cells ...any) {
	row := make([]string, len(t.head))
	for i := range row {
		if i < len(cells) {
			row[i] = fmt.Sprint(cells[i])
		}
	}
	t.rows = append(t.rows, row)
}

// minName is the narrowest a name column is cut to.
const minName = 8

// widths returns the width of each column once fitted.
func (t *table) widths() []int {
	w := make([]int, len(t.head))
	for i, h := range t.head {
		w[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			w[i] = max(w[i], utf8.RuneCountInString(c))
		}
	}
	total := 2 * (len(w) - 1)
	for _, n := range w {
		total += n
	}
	for total > ctlMaxWidth {
		widest := -1
		for i, n := range w {
			if t.names[i] && n > max(minName, utf8.RuneCountInString(t.head[i])) && (widest < 0 || n > w[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break // nothing left to cut: the other columns are too wide
		}
		w[widest]--
		total--
	}
	return w
}

// write prints the table.
func (t *table) write(out io.Writer) error {
	w := t.widths()
	var sb strings.Builder
	line := func(cells []string) {
		sb.Reset()
		for i, c := range cells {
			c = cut(c, w[i])
			pad := strings.Repeat(" ", w[i]-utf8.RuneCountInString(c))
			switch {
			case t.right[i]:
				sb.WriteString(pad + c)
			case i == len(cells)-1:
				sb.WriteString(c) // no trailing blanks
			default:
				sb.WriteString(c + pad)
			}
			if i < len(cells)-1 {
				sb.WriteString("  ")
			}
		}
		sb.WriteByte('\n')
	}
	line(t.head)
	if _, err := io.WriteString(out, sb.String()); err != nil {
		return err
	}
	for _, r := range t.rows {
		line(r)
		if _, err := io.WriteString(out, sb.String()); err != nil {
			return err
		}
	}
	return nil
}

// cut shortens s to n runes, ending it with "…" when it was longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// writeFields prints label/value lines, the labels aligned, each line cut
// to ctlMaxWidth.
func writeFields(out io.Writer, fields [][2]string) error {
	w := 0
	for _, f := range fields {
		w = max(w, len(f[0]))
	}
	for _, f := range fields {
		line := strings.TrimRight(fmt.Sprintf("%-*s  %s", w, f[0], f[1]), " ")
		if _, err := fmt.Fprintln(out, cut(line, ctlMaxWidth)); err != nil {
			return err
		}
	}
	return nil
}
