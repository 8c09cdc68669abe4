package modeltest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// The read side of the sequential model test: the checks run after every
// step (quick), the full comparison (verify), the read operations, invalid
// inputs, Close and reopen, and the final drain.

var allQueueNames = []string{"q0", "q1", "q2", "q3"}

func micros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// quick checks, after every step, what QueueStats and Counters say.
func (m *seqModel) quick() {
	if m.fail != nil || m.closed {
		return
	}
	for _, name := range allQueueNames {
		q := m.queues[name]
		qs, err := m.b.QueueStats(mctx, name)
		if q == nil {
			if !errors.Is(err, queen.ErrNotFound) {
				m.failf("stats.missing", "QueueStats(%s) of a missing queue: %v", name, err)
			}
			continue
		}
		if err != nil {
			m.failf("stats.err", "QueueStats(%s): %v", name, err)
			continue
		}
		m.checkStats(q, qs)
	}
	m.checkCounters()
}

func (m *seqModel) checkStats(q *smQueue, qs *queen.QueueStats) {
	at := "QueueStats(" + q.name + ")"
	if qs.Messages < 0 || qs.Pending < 0 || qs.InFlight < 0 || qs.DeadLetters < 0 || qs.Parked < 0 {
		m.failf("stats.negative", "%s: negative count: messages %d pending %d inflight %d dead %d parked %d", at, qs.Messages, qs.Pending, qs.InFlight, qs.DeadLetters, qs.Parked)
	}
	if q.id == "" {
		q.id = qs.ID
	} else if qs.ID != q.id {
		m.failf("stats.id", "%s: id %s, model says %s", at, qs.ID, q.id)
	}
	if qs.Messages != m.stored(q) {
		m.failAt("stats.messages", []string{fmt.Sprintf("require.EqualValues(t, %d, stats(%q).Messages)", m.stored(q), q.name)}, "%s: %d messages, model says %d", at, qs.Messages, m.stored(q))
	}
	if n := int64(len(m.lettersOf(q, "dl"))); qs.DeadLetters != n {
		m.failAt("stats.deadLetters", []string{fmt.Sprintf("require.EqualValues(t, %d, stats(%q).DeadLetters)", n, q.name)}, "%s: %d dead letters, model says %d", at, qs.DeadLetters, n)
	}
	if n := int64(len(m.lettersOf(q, "pk"))); qs.Parked != n {
		m.failAt("stats.parked", []string{fmt.Sprintf("require.EqualValues(t, %d, stats(%q).Parked)", n, q.name)}, "%s: %d parked, model says %d", at, qs.Parked, n)
	}
	for _, ps := range qs.Partitions {
		p := q.parts[ps.Name]
		for _, cs := range ps.Cursors {
			g := q.groups[cs.Group]
			if p == nil || g == nil || g.cursors[p.name] == nil {
				continue
			}
			if c := g.cursors[p.name]; g.conflation && cs.Offset > c.offset && cs.Offset <= m.head(g, p, c) {
				// A conflating claim that found the newest message not yet
				// visible moved the cursor up to it: the model cannot tell
				// which partitions an empty pop claimed.
				c.offset, c.stored = cs.Offset, true
			}
		}
	}
	if qs.Pending != m.pending(q) {
		m.failAt("stats.pending", []string{fmt.Sprintf("require.EqualValues(t, %d, stats(%q).Pending)", m.pending(q), q.name)}, "%s: pending %d, model says %d", at, qs.Pending, m.pending(q))
	}
	inflight := int64(0)
	for _, g := range q.groups {
		for _, c := range g.cursors {
			inflight += m.inFlight(c)
		}
	}
	if qs.InFlight != inflight {
		m.failAt("stats.inFlight", []string{fmt.Sprintf("require.EqualValues(t, %d, stats(%q).InFlight)", inflight, q.name)}, "%s: in flight %d, model says %d", at, qs.InFlight, inflight)
	}
	if !slices.Equal(qs.Groups, q.groupNames()) {
		m.failf("stats.groups", "%s: groups %v, model says %v", at, qs.Groups, q.groupNames())
	}
	if qs.PartitionN != len(q.parts) || len(qs.Partitions) != len(q.parts) {
		m.failf("stats.partitions", "%s: %d partitions, model says %v", at, qs.PartitionN, q.order)
		return
	}
	for _, ps := range qs.Partitions {
		p := q.parts[ps.Name]
		if p == nil {
			m.failf("stats.partitions", "%s: unknown partition %s", at, ps.Name)
			continue
		}
		pat := at + " partition " + p.name
		m.learnPID(p, ps.ID, pat)
		if ps.Messages != p.liveIn(p.first, p.next()) || ps.FirstOffset != p.first || ps.NextOffset != p.next() || ps.Messages < 0 {
			m.failf("stats.partition", "%s: messages %d first %d next %d, model says %d %d %d", pat, ps.Messages, ps.FirstOffset, ps.NextOffset, p.liveIn(p.first, p.next()), p.first, p.next())
		}
		if !ps.LastPushAt.Equal(micros(p.lastPush)) {
			m.failf("stats.lastPush", "%s: last push %v, model says %v", pat, ps.LastPushAt, micros(p.lastPush))
		}
		if ps.CreatedAt.UnixMicro() != p.created {
			m.failf("stats.created", "%s: created %v, model says %v", pat, ps.CreatedAt, micros(p.created))
		}
		var want []string
		for _, g := range q.groups {
			if g.cursors[p.name] != nil {
				want = append(want, g.name)
			}
		}
		var got []string
		for _, cs := range ps.Cursors {
			got = append(got, cs.Group)
		}
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			m.failf("stats.cursors", "%s: cursors of %v, model says %v", pat, got, want)
			continue
		}
		for _, cs := range ps.Cursors {
			c := q.groups[cs.Group].cursors[p.name]
			cat := pat + " group " + cs.Group
			cx := fmt.Sprintf("cursor(%q, %q, %q)", q.name, p.name, cs.Group)
			if p.norm(cs.Offset) != p.norm(c.offset) {
				m.failAt("stats.offset", []string{fmt.Sprintf("require.EqualValues(t, %d, %s.Offset)", p.norm(c.offset), cx)}, "%s: cursor at %d, model says %d", cat, cs.Offset, c.offset)
			}
			if cs.Lag < 0 || cs.InFlight < 0 || cs.Consumed < 0 || cs.Retries < 0 {
				m.failf("stats.negative", "%s: %+v", cat, cs)
			}
			if cs.Lag != m.lag(p, c) {
				m.failAt("stats.lag", []string{fmt.Sprintf("require.EqualValues(t, %d, %s.Lag)", m.lag(p, c), cx)}, "%s: lag %d, model says %d", cat, cs.Lag, m.lag(p, c))
			}
			lid, exp := "", time.Time{}
			if m.leaseLive(c) {
				lid, exp = c.lease.id, micros(c.lease.expires)
			}
			if int64(cs.InFlight) != m.inFlight(c) || cs.LeaseID != lid || !cs.LeaseExpiresAt.Equal(exp) {
				m.failAt("stats.lease", []string{fmt.Sprintf("require.EqualValues(t, %d, %s.InFlight)", m.inFlight(c), cx), fmt.Sprintf("require.Equal(t, %v, %s.LeaseID != \"\")", lid != "", cx)}, "%s: in flight %d lease %q until %v, model says %d %q %v", cat, cs.InFlight, cs.LeaseID, cs.LeaseExpiresAt, m.inFlight(c), lid, exp)
			}
			if cs.Retries != c.retries || cs.Consumed != c.consumed || !cs.LastAckAt.Equal(micros(c.lastAck)) {
				m.failAt("stats.cursor", []string{fmt.Sprintf("require.Equal(t, %d, %s.Retries)", c.retries, cx), fmt.Sprintf("require.EqualValues(t, %d, %s.Consumed)", c.consumed, cx)}, "%s: retries %d consumed %d last ack %v, model says %d %d %v", cat, cs.Retries, cs.Consumed, cs.LastAckAt, c.retries, c.consumed, micros(c.lastAck))
			}
		}
	}
}

func (m *seqModel) checkCounters() {
	c := m.b.Counters()
	w := m.counters
	pushed, popped := w.pushed, w.popped
	if c.Pushed != pushed || c.Popped != popped || c.LeasesRenewed != w.renewed || c.LeasesExpired != w.expired || c.DeadLettered != w.dead || c.Parked != w.parked {
		m.failAt("counters", []string{fmt.Sprintf("c := b.Counters()\n\trequire.Equal(t, []int64{%d, %d, %d, %d, %d, %d}, []int64{c.Pushed, c.Popped, c.LeasesRenewed, c.LeasesExpired, c.DeadLettered, c.Parked})", pushed, popped, w.renewed, w.expired, w.dead, w.parked)}, "Counters pushed %d popped %d renewed %d expired %d dead %d parked %d, model says %d %d %d %d %d %d",
			c.Pushed, c.Popped, c.LeasesRenewed, c.LeasesExpired, c.DeadLettered, c.Parked, pushed, popped, w.renewed, w.expired, w.dead, w.parked)
	}
	for _, st := range []queen.AckStatus{queen.AckCompleted, queen.AckFailed, queen.AckRetry, queen.AckDLQ, queen.AckPark} {
		want := w.acked[st]
		if c.Acked[st] != want {
			m.failf("counters", "Counters.Acked[%s] %d, model says %d", st, c.Acked[st], want)
		}
	}
}

// learnLetters compares the dead letters and parked messages of every
// queue with the model, learning the ids of new entries.
func (m *seqModel) learnLetters() {
	if m.fail != nil {
		return
	}
	for _, q := range m.sortedQueues() {
		for _, kind := range []string{"dl", "pk"} {
			list := m.b.DeadLetters
			if kind == "pk" {
				list = m.b.ParkedMessages
			}
			page, err := list(mctx, queen.LetterFilter{Queue: q.name, Limit: 1000})
			if err != nil {
				m.failf("letters.err", "list %s of %s: %v", kind, q.name, err)
				return
			}
			if page.Total != len(page.Letters) || page.Total < 0 {
				m.failf("letters.total", "%s of %s: total %d for %d entries", kind, q.name, page.Total, len(page.Letters))
			}
			model := m.lettersOf(q, kind)
			used := map[*smLetter]bool{}
			for _, e := range page.Letters {
				var hit *smLetter
				for _, l := range model {
					if l.id == e.ID {
						hit = l
					}
				}
				if hit == nil {
					for _, l := range model {
						if l.id == "" && !used[l] && l.group == e.ConsumerGroup && l.part == e.Partition && l.off == e.Offset && l.err == e.Error && l.retries == e.RetryCount && l.failedAt == e.FailedAt.UnixMicro() {
							hit = l
							break
						}
					}
				}
				where := fmt.Sprintf("%s entry %s (%s %s/%s@%d %q)", kind, e.ID, e.ConsumerGroup, e.Queue, e.Partition, e.Offset, e.Error)
				if hit == nil {
					m.failf("letters.extra", "%s: the model has no such entry", where)
					continue
				}
				used[hit] = true
				hit.id = e.ID
				p := q.parts[hit.part]
				if e.Queue != q.name || e.TransactionID != hit.txid || e.PartitionID != p.id || string(e.Payload) != hit.payload || e.CreatedAt.UnixMicro() != hit.created ||
					e.ConsumerGroup != hit.group || e.Offset != hit.off || e.Error != hit.err || e.RetryCount != hit.retries || e.FailedAt.UnixMicro() != hit.failedAt {
					m.failf("letters.fields", "%s: tx %q pid %s payload %.40s created %d retries %d failed %d, model says %q %s %.40s %d %d %d",
						where, e.TransactionID, e.PartitionID, e.Payload, e.CreatedAt.UnixMicro(), e.RetryCount, e.FailedAt.UnixMicro(), hit.txid, p.id, hit.payload, hit.created, hit.retries, hit.failedAt)
				}
			}
			for _, l := range model {
				if !used[l] {
					m.failf("letters.missing", "%s %s/%s@%d of %s (%q, retries %d) is not listed", kind, q.name, l.part, l.off, l.group, l.err, l.retries)
				}
			}
		}
	}
}

// verify compares everything the broker reports with the model.
func (m *seqModel) verify() {
	if m.fail != nil || m.closed {
		return
	}
	m.emit("// the model compares DescribeQueue, ListQueues, ListGroups, letters and Fetch of every partition here")
	for _, name := range allQueueNames {
		q := m.queues[name]
		info, err := m.b.DescribeQueue(mctx, name)
		if q == nil {
			if !errors.Is(err, queen.ErrNotFound) {
				m.failf("describe.missing", "DescribeQueue(%s) of a missing queue: %v", name, err)
			}
			continue
		}
		if err != nil {
			m.failf("describe.err", "DescribeQueue(%s): %v", name, err)
			continue
		}
		def := ""
		if p := q.parts[queen.DefaultPartition]; p != nil {
			def = p.id
		}
		if info.Name != name || (q.id != "" && info.ID != q.id) || info.DefaultPartitionID != def || !configEqual(info.Config, q.cfg) {
			m.failf("describe", "DescribeQueue(%s): %+v, model says id %s default %s config %+v", name, info, q.id, def, q.cfg)
		}
	}
	list, err := m.b.ListQueues(mctx)
	if err != nil {
		m.failf("listqueues.err", "ListQueues: %v", err)
		return
	}
	var names []string
	for _, qs := range list {
		names = append(names, qs.Name)
		if q := m.queues[qs.Name]; q != nil {
			if qs.Messages != m.stored(q) || qs.DeadLetters != int64(len(m.lettersOf(q, "dl"))) || qs.Parked != int64(len(m.lettersOf(q, "pk"))) || qs.PartitionN != len(q.parts) {
				m.failf("listqueues", "ListQueues %s: %+v, model says %d messages", qs.Name, qs, m.stored(q))
			}
		}
	}
	var want []string
	for _, q := range m.sortedQueues() {
		want = append(want, q.name)
	}
	if !slices.Equal(names, want) {
		m.failf("listqueues", "ListQueues names %v, model says %v", names, want)
	}
	m.checkGroups()
	m.learnLetters()
	for _, q := range m.sortedQueues() {
		for _, p := range q.partList() {
			m.checkFetch(q, p, 0, 1000, false)
		}
	}
	if err := m.b.Ping(mctx); err != nil {
		m.failf("ping", "Ping: %v", err)
	}
}

func configEqual(a, b queen.QueueConfig) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// checkGroups compares ListGroups with the model.
func (m *seqModel) checkGroups() {
	gs, err := m.b.ListGroups(mctx, queen.GroupFilter{})
	if err != nil {
		m.failf("listgroups.err", "ListGroups: %v", err)
		return
	}
	n := 0
	for _, q := range m.queues {
		n += len(q.groups)
	}
	if len(gs) != n {
		m.failf("listgroups.count", "ListGroups: %d groups, model says %d", len(gs), n)
	}
	for _, gst := range gs {
		q := m.queues[gst.Queue]
		var g *smGroup
		if q != nil {
			g = q.groups[gst.Group]
		}
		where := "ListGroups " + gst.Queue + "/" + gst.Group
		if g == nil {
			m.failf("listgroups.extra", "%s: the model has no such group", where)
			continue
		}
		var lag, inflight, consumed int64
		var active, withLag, parts int
		var lastAck, oldest int64
		for _, p := range q.partList() {
			c := g.cursors[p.name]
			if c == nil {
				continue
			}
			parts++
			l := m.lag(p, c)
			lag += l
			if l > 0 {
				withLag++
				if at := p.msgs[p.firstLive(c.offset)].at; oldest == 0 || at < oldest {
					oldest = at
				}
			}
			inflight += m.inFlight(c)
			if m.leaseLive(c) {
				active++
			}
			consumed += c.consumed
			lastAck = max(lastAck, c.lastAck)
		}
		if string(gst.Mode) != string(g.mode) || !gst.From.Equal(micros(g.from)) || !gst.JoinedAt.Equal(micros(g.joined)) {
			m.failf("listgroups.meta", "%s: mode %s from %v joined %v, model says %s %v %v", where, gst.Mode, gst.From, gst.JoinedAt, g.mode, micros(g.from), micros(g.joined))
		}
		if gst.Conflation != g.conflation || gst.Partitions != parts || gst.InFlight != inflight || gst.ActiveLeases != active || gst.Consumed != consumed || !gst.LastAckAt.Equal(micros(lastAck)) {
			m.failf("listgroups", "%s: %+v, model says partitions %d in flight %d active %d consumed %d last ack %v", where, gst, parts, inflight, active, consumed, micros(lastAck))
		}
		if gst.Lag != lag || gst.PartitionsWithLag != withLag || !gst.OldestPendingAt.Equal(micros(oldest)) {
			m.failf("listgroups.lag", "%s: lag %d in %d partitions, oldest %v; model says %d %d %v", where, gst.Lag, gst.PartitionsWithLag, gst.OldestPendingAt, lag, withLag, micros(oldest))
		}
		if gst.Lag < 0 || gst.InFlight < 0 || gst.Consumed < 0 {
			m.failf("stats.negative", "%s: %+v", where, gst)
		}
	}
}

// checkFetch compares a Fetch of p with the model.
func (m *seqModel) checkFetch(q *smQueue, p *smPart, from int64, limit int, builder bool) {
	var res *queen.FetchResult
	var err error
	if builder {
		var out map[string]*queen.FetchResult
		out, err = m.b.Queue(q.name).FromOffset(from).Batch(limit).Fetch(mctx, []string{p.name})
		if err == nil {
			res = out[p.name]
		}
	} else {
		res, err = m.b.Fetch(mctx, q.name, p.name, from, limit)
	}
	where := fmt.Sprintf("Fetch(%s, %s, %d, %d)", q.name, p.name, from, limit)
	if err != nil || res == nil {
		m.failf("fetch.err", "%s: %v", where, err)
		return
	}
	if limit == 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	start := max(from, p.first)
	var want []int64
	for o := start; o < p.next() && len(want) < limit; o++ {
		if !p.msgs[o].gone {
			want = append(want, o)
		}
	}
	next := start
	switch {
	case start >= p.next():
	case len(want) < limit:
		next = p.next()
	default:
		next = want[len(want)-1] + 1
	}
	var got []int64
	for _, rec := range res.Records {
		got = append(got, rec.Offset)
	}
	if !slices.Equal(got, want) || res.NextOffset != next {
		m.failf("fetch", "%s: offsets %v next %d, model says %v next %d", where, got, res.NextOffset, want, next)
		return
	}
	for _, rec := range res.Records {
		sm := p.msgs[rec.Offset]
		if rec.TransactionID != sm.txid || normPayload(rec.Payload) != sm.payload || rec.CreatedAt.UnixMicro() != sm.at {
			m.failf("fetch.record", "%s: record %d tx %q at %d payload %.40s, model says %q %d %.40s", where, rec.Offset, rec.TransactionID, rec.CreatedAt.UnixMicro(), rec.Payload, sm.txid, sm.at, sm.payload)
		}
	}
}

func (m *seqModel) opFetch(r *rand.Rand) {
	qn, pn := seqQueues.Pick(r), seqParts.Pick(r)
	q := m.queues[qn]
	var p *smPart
	if q != nil {
		p = q.parts[pn]
	}
	from := int64(0)
	if p != nil {
		from = int64(r.IntN(int(p.next()) + 3))
	}
	limit := []int{0, 1, 3, 1000}[r.IntN(4)]
	builder := r.IntN(3) == 0
	if p == nil {
		var err error
		m.emit("_, err = b.Fetch(ctx, %s, %s, 0, 0)", gq(qn), gq(pn))
		m.emitErr(queen.ErrNotFound)
		if builder {
			_, err = m.b.Queue(qn).Fetch(mctx, []string{pn})
		} else {
			_, err = m.b.Fetch(mctx, qn, pn, 0, 0)
		}
		m.checkErr("fetch.missing", "Fetch of missing "+qn+"/"+pn, err, queen.ErrNotFound)
		return
	}
	m.emit("_, err = b.Fetch(ctx, %s, %s, %d, %d)", gq(qn), gq(pn), from, limit)
	m.checkFetch(q, p, from, limit, builder)
}

// status is what GetMessage and ListMessages should say of p@off.
func (m *seqModel) status(p *smPart, off int64) (queen.MessageStatus, map[string]bool) {
	consumed := map[string]bool{}
	hasDL, hasPK := false, false
	for _, l := range m.letters {
		if !l.gone && l.q == p.q && l.part == p.name && l.off == off {
			if l.kind == "dl" {
				hasDL = true
			} else {
				hasPK = true
			}
		}
	}
	allConsumed, anyLeased, named := true, false, 0
	var qm *smCursor
	qmLeased := false
	for _, g := range p.q.groups {
		c := g.cursors[p.name]
		eo := p.first
		leased := false
		if c != nil {
			eo = max(c.offset, p.first)
			leased = m.leaseLive(c) && off >= eo && off < max(c.end, eo)
		}
		consumed[g.name] = off < eo
		if g.name == queen.QueueModeGroup {
			qm, qmLeased = c, leased
			if qm == nil {
				qm = &smCursor{offset: p.first}
			}
			continue
		}
		named++
		allConsumed = allConsumed && off < eo
		anyLeased = anyLeased || (leased && off >= eo)
	}
	switch {
	case hasDL:
		return queen.MessageDeadLetter, consumed
	case hasPK:
		return queen.MessageParked, consumed
	case qm != nil:
		switch {
		case consumed[queen.QueueModeGroup]:
			return queen.MessageCompleted, consumed
		case qmLeased:
			return queen.MessageProcessing, consumed
		}
		return queen.MessagePending, consumed
	case named == 0:
		return queen.MessagePending, consumed
	case allConsumed:
		return queen.MessageCompleted, consumed
	case anyLeased:
		return queen.MessageProcessing, consumed
	}
	return queen.MessagePending, consumed
}

func (m *seqModel) opGetMessage(r *rand.Rand) {
	p, off := m.someMessage(r)
	if p == nil {
		return
	}
	txid := p.msgs[off].txid
	var want error
	o, ok := p.txOffset(txid)
	if !ok {
		want = queen.ErrNotFound
	}
	m.emit("_, err = b.GetMessage(ctx, pid(%s, %s), %s)", gq(p.q.name), gq(p.name), gq(txid))
	m.emitErr(want)
	mi, err := m.b.GetMessage(mctx, p.id, txid)
	if !m.checkErr("getmessage.err", fmt.Sprintf("GetMessage %s/%s %s", p.q.name, p.name, txid), err, want) || want != nil {
		return
	}
	sm := p.msgs[o]
	st, consumed := m.status(p, o)
	where := fmt.Sprintf("GetMessage %s/%s@%d", p.q.name, p.name, o)
	if mi.Offset != o || mi.TransactionID != txid || normPayload(mi.Payload) != sm.payload || mi.CreatedAt.UnixMicro() != sm.at || mi.Queue != p.q.name || mi.Partition != p.name || mi.PartitionID != p.id || mi.Encrypted != sm.enc {
		m.failf("getmessage", "%s: %+v, model says offset %d payload %.40s at %d encrypted %v", where, mi, o, sm.payload, sm.at, sm.enc)
	}
	if mi.Status != st {
		m.failf("getmessage.status", "%s: status %s, model says %s", where, mi.Status, st)
	}
	for _, gs := range mi.Groups {
		if c, ok := consumed[gs.Group]; !ok || c != gs.Consumed {
			m.failf("getmessage.groups", "%s: group %s consumed=%v, model says %v (%v)", where, gs.Group, gs.Consumed, c, ok)
		}
	}
	if len(mi.Groups) != len(consumed) {
		m.failf("getmessage.groups", "%s: %d groups, model says %d", where, len(mi.Groups), len(consumed))
	}
}

func (m *seqModel) opListMessages(r *rand.Rand) {
	f := queen.MessageFilter{Limit: 1000}
	if r.IntN(4) > 0 {
		f.Queue = seqQueues.Pick(r)
	}
	if r.IntN(4) == 0 {
		f.Partition = seqParts.Pick(r)
	}
	if r.IntN(3) == 0 {
		f.Status = []queen.MessageStatus{queen.MessagePending, queen.MessageProcessing, queen.MessageCompleted, queen.MessageDeadLetter, queen.MessageParked}[r.IntN(5)]
	}
	m.emit("_, err = b.ListMessages(ctx, queen.MessageFilter{Queue: %s, Partition: %s, Status: %s, Limit: 1000})", gq(f.Queue), gq(f.Partition), gq(string(f.Status)))
	m.emitErr(nil)
	page, err := m.b.ListMessages(mctx, f)
	if !m.checkErr("listmessages.err", "ListMessages", err, nil) {
		return
	}
	want := map[string]queen.MessageStatus{}
	qmode, named := false, map[string]bool{}
	for _, q := range m.sortedQueues() {
		if f.Queue != "" && q.name != f.Queue {
			continue
		}
		for gn := range q.groups {
			if gn == queen.QueueModeGroup {
				qmode = true
			} else {
				named[gn] = true
			}
		}
		for _, p := range q.partList() {
			if f.Partition != "" && p.name != f.Partition {
				continue
			}
			for o := p.first; o < p.next(); o++ {
				if p.msgs[o].gone {
					continue
				}
				st, _ := m.status(p, o)
				if f.Status == "" || st == f.Status {
					want[fmt.Sprintf("%s/%s@%d", q.name, p.name, o)] = st
				}
			}
		}
	}
	got := map[string]queen.MessageStatus{}
	for k, mi := range page.Messages {
		got[fmt.Sprintf("%s/%s@%d", mi.Queue, mi.Partition, mi.Offset)] = mi.Status
		if k > 0 && mi.CreatedAt.After(page.Messages[k-1].CreatedAt) {
			m.failf("listmessages.order", "ListMessages: not newest first at %d", k)
		}
	}
	if len(want) < 1000 && !mapsEqual(got, want) {
		m.failf("listmessages", "ListMessages %+v: %v, model says %v", f, got, want)
	}
	if page.QueueMode != qmode || page.BusGroups != len(named) {
		m.failf("listmessages.groups", "ListMessages %+v: queue mode %v bus groups %d, model says %v %d", f, page.QueueMode, page.BusGroups, qmode, len(named))
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

var traceNames = []string{"n1", "n2"}

func (m *seqModel) opTrace(r *rand.Rand) {
	p, off := m.someMessage(r)
	if p == nil {
		return
	}
	txid := p.msgs[off].txid
	ev := queen.TraceEvent{PartitionID: p.id, TransactionID: txid, EventType: []string{"", "charged", "sent"}[r.IntN(3)], Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, r.IntN(9)))}
	if r.IntN(2) == 0 {
		ev.ConsumerGroup = "g1"
	}
	for _, n := range traceNames {
		if r.IntN(2) == 0 {
			ev.Names = append(ev.Names, n)
		}
	}
	var want error
	o, ok := p.txOffset(txid)
	if !ok {
		want = queen.ErrNotFound
	}
	m.emit("_, err = b.RecordTrace(ctx, queen.TraceEvent{PartitionID: pid(%s, %s), TransactionID: %s, EventType: %s, ConsumerGroup: %s, Names: %#v, Data: json.RawMessage(%s)})",
		gq(p.q.name), gq(p.name), gq(txid), gq(ev.EventType), gq(ev.ConsumerGroup), ev.Names, gq(string(ev.Data)))
	m.emitErr(want)
	got, err := m.b.RecordTrace(mctx, ev)
	if !m.checkErr("trace.err", "RecordTrace "+txid, err, want) || want != nil {
		return
	}
	if got.ID == "" || got.Queue != p.q.name || got.Partition != p.name || got.CreatedAt.UnixMicro() != m.now() {
		m.failf("trace.result", "RecordTrace: %+v", got)
	}
	tr := smTrace{group: cmpOr(ev.ConsumerGroup, queen.QueueModeGroup), event: cmpOr(ev.EventType, "info"), names: ev.Names, data: string(ev.Data), at: m.now()}
	p.msgs[o].traces = append(p.msgs[o].traces, tr)
}

func traceKey(group, event string, names []string, data string, at int64) string {
	return fmt.Sprintf("%s|%s|%v|%s|%d", group, event, names, data, at)
}

// tracesOf is what the broker holds under p's transactionId txid: the
// traces of its stored message, and (retention-traces) of retained ones.
func (m *seqModel) tracesOf(p *smPart, txid string) []string {
	var out []string
	for _, msg := range p.msgs {
		if msg.txid != txid || (msg.gone && msg.deleted) {
			continue
		}
		for _, tr := range msg.traces {
			out = append(out, traceKey(tr.group, tr.event, tr.names, tr.data, tr.at))
		}
	}
	sort.Strings(out)
	return out
}

func (m *seqModel) opTraceRead(r *rand.Rand) {
	switch r.IntN(3) {
	case 0:
		p, off := m.someMessage(r)
		if p == nil {
			return
		}
		txid := p.msgs[off].txid
		m.emit("_, err = b.Traces(ctx, pid(%s, %s), %s)", gq(p.q.name), gq(p.name), gq(txid))
		evs, err := m.b.Traces(mctx, p.id, txid)
		if !m.checkErr("traces.err", "Traces", err, nil) {
			return
		}
		var got []string
		for _, e := range evs {
			var names []string
			names = append(names, e.Names...)
			got = append(got, traceKey(e.ConsumerGroup, e.EventType, names, string(e.Data), e.CreatedAt.UnixMicro()))
		}
		sort.Strings(got)
		if want := m.tracesOf(p, txid); !slices.Equal(got, want) {
			m.failf("traces", "Traces %s/%s %s: %v, model says %v", p.q.name, p.name, txid, got, want)
		}
	case 1:
		name := traceNames[r.IntN(len(traceNames))]
		m.emit("_, err = b.TracesByName(ctx, %s, 1000, 0)", gq(name))
		page, err := m.b.TracesByName(mctx, name, 1000, 0)
		if !m.checkErr("traces.err", "TracesByName", err, nil) {
			return
		}
		var want []string
		for _, q := range m.sortedQueues() {
			for _, p := range q.partList() {
				for _, msg := range p.msgs {
					if msg.gone && msg.deleted {
						continue
					}
					for _, tr := range msg.traces {
						if slices.Contains(tr.names, name) {
							want = append(want, q.name+"/"+p.name+"/"+msg.txid+"|"+traceKey(tr.group, tr.event, nil, tr.data, tr.at))
						}
					}
				}
			}
		}
		var got []string
		for _, e := range page.Traces {
			got = append(got, e.Queue+"/"+e.Partition+"/"+e.TransactionID+"|"+traceKey(e.ConsumerGroup, e.EventType, nil, string(e.Data), e.CreatedAt.UnixMicro()))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) || page.Total != len(want) {
			m.failf("traces.byName", "TracesByName(%s): %d %v, model says %v", name, page.Total, got, want)
		}
	default:
		m.emit("_, err = b.TraceNames(ctx, 0, 0)")
		page, err := m.b.TraceNames(mctx, 0, 0)
		if !m.checkErr("traces.err", "TraceNames", err, nil) {
			return
		}
		type agg struct {
			events int
			msgs   map[string]bool
			last   int64
		}
		want := map[string]*agg{}
		for _, q := range m.sortedQueues() {
			for _, p := range q.partList() {
				for _, msg := range p.msgs {
					if msg.gone && msg.deleted {
						continue
					}
					for _, tr := range msg.traces {
						for _, n := range tr.names {
							a := want[n]
							if a == nil {
								a = &agg{msgs: map[string]bool{}}
								want[n] = a
							}
							a.events++
							a.msgs[p.id+"/"+msg.txid] = true
							a.last = max(a.last, tr.at)
						}
					}
				}
			}
		}
		if page.Total != len(want) {
			m.failf("traces.names", "TraceNames: %d names, model says %d", page.Total, len(want))
		}
		for _, tn := range page.Names {
			a := want[tn.Name]
			if a == nil || tn.Events != a.events || tn.Messages != len(a.msgs) || tn.LastSeen.UnixMicro() != a.last {
				m.failf("traces.names", "TraceNames %+v, model says %+v", tn, a)
			}
		}
	}
}

func (m *seqModel) opMisc(r *rand.Rand) {
	switch r.IntN(4) {
	case 0:
		m.emit("require.NoError(t, b.Ping(ctx))")
		if err := m.b.Ping(mctx); err != nil {
			m.failf("ping", "Ping: %v", err)
		}
		if !m.b.Now().Equal(m.clock.Now()) || m.b.MaintenanceMode() != m.maint {
			m.failf("now", "Now %v maintenance %v, model says %v %v", m.b.Now(), m.b.MaintenanceMode(), m.clock.Now(), m.maint)
		}
	case 1:
		m.verify()
	case 2:
		// Paged, filtered letters through Admin.
		q := m.queues[seqQueues.Pick(r)]
		if q == nil {
			return
		}
		kind := "dl"
		if r.IntN(3) == 0 {
			kind = "pk"
		}
		f := queen.LetterFilter{Queue: q.name, Limit: 1 + r.IntN(3), Offset: r.IntN(3)}
		if r.IntN(2) == 0 {
			f.ConsumerGroup = groupOf(seqGroups.Pick(r))
		}
		if r.IntN(3) == 0 {
			f.Partition = seqParts.Pick(r)
		}
		var model []*smLetter
		for _, l := range m.lettersOf(q, kind) {
			if (f.ConsumerGroup == "" || l.group == f.ConsumerGroup) && (f.Partition == "" || l.part == f.Partition) {
				if l.id == "" {
					return // not learnt yet: the order among equal times is by id
				}
				model = append(model, l)
			}
		}
		sort.Slice(model, func(a, b int) bool {
			if model[a].failedAt != model[b].failedAt {
				return model[a].failedAt > model[b].failedAt
			}
			return model[a].id > model[b].id
		})
		var want []string
		for k := f.Offset; k < len(model) && len(want) < f.Limit; k++ {
			want = append(want, model[k].id)
		}
		var page *queen.LetterPage
		var err error
		if kind == "dl" {
			m.emit("_, err = b.DeadLetters(ctx, %#v)", f)
			page, err = m.b.DeadLetters(mctx, f)
		} else {
			m.emit("_, err = b.ParkedMessages(ctx, %#v)", f)
			page, err = m.b.ParkedMessages(mctx, f)
		}
		if !m.checkErr("letters.err", "list letters", err, nil) {
			return
		}
		var got []string
		for _, e := range page.Letters {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) || page.Total != len(model) {
			m.failf("letters.page", "%s page %+v: total %d %v, model says %d %v", kind, f, page.Total, got, len(model), want)
		}
	default:
		a := m.b.Admin()
		name := seqQueues.Pick(r)
		m.emit("_, err = b.Admin().GetQueue(ctx, %s)", gq(name))
		_, err := a.GetQueue(mctx, name)
		var want error
		if m.queues[name] == nil {
			want = queen.ErrNotFound
		}
		m.checkErr("admin.getqueue", "Admin().GetQueue", err, want)
		if _, err := a.ListQueues(mctx); err != nil {
			m.failf("admin.listqueues", "Admin().ListQueues: %v", err)
		}
		if _, err := a.QueueStats(mctx, name); want == nil && err != nil {
			m.failf("admin.queuestats", "Admin().QueueStats: %v", err)
		}
		g := seqGroups.Pick(r)
		gs, err := a.ListConsumerGroups(mctx, groupOf(g))
		if err != nil {
			m.failf("admin.listgroups", "Admin().ListConsumerGroups: %v", err)
		}
		n := 0
		for _, q := range m.queues {
			if q.groups[groupOf(g)] != nil {
				n++
			}
		}
		if len(gs) != n {
			m.failf("admin.listgroups", "Admin().ListConsumerGroups(%s): %d entries, model says %d", groupOf(g), len(gs), n)
		}
	}
}

// opInvalid makes one call with an invalid input: it must be refused with
// ErrInvalidArgument (or the sentinel its doc names) and change nothing.
func (m *seqModel) opInvalid(r *rand.Rand) {
	long := strings.Repeat("x", queen.MaxNameLen+1)
	type call struct {
		code string
		want error
		fn   func() error
	}
	msg := &queen.Message{Queue: "q0", TransactionID: "t", PartitionID: "p"}
	calls := []call{
		{`b.Push(ctx, []queen.PushItem{{Queue: ""}})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Push(mctx, []queen.PushItem{{Queue: ""}}); return err }},
		{`b.Push(ctx, []queen.PushItem{{Queue: "q0", Payload: json.RawMessage("{bad")}})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Push(mctx, []queen.PushItem{{Queue: "q0", Partition: "a", Payload: json.RawMessage("{x")}, {Queue: "q0", Payload: json.RawMessage("{bad")}})
			return err
		}},
		{`b.Push(ctx, []queen.PushItem{{Queue: "q0", Partition: "a\x00b"}})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Push(mctx, []queen.PushItem{{Queue: "q0", Partition: "a\x00b"}})
			return err
		}},
		{`b.Push(ctx, []queen.PushItem{{Queue: "q0", TransactionID: long}})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Push(mctx, []queen.PushItem{{Queue: "q0", TransactionID: long}})
			return err
		}},
		{`b.Push(ctx, []queen.PushItem{{Queue: long}})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Push(mctx, []queen.PushItem{{Queue: long}}); return err }},
		{`b.Pop(ctx, queen.PopRequest{Queue: "q0", Batch: -1})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Pop(mctx, queen.PopRequest{Queue: "q0", Batch: -1}); return err }},
		{`b.Pop(ctx, queen.PopRequest{Queue: "q0", Conflation: true})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Pop(mctx, queen.PopRequest{Queue: "q0", Conflation: true})
			return err
		}},
		{`b.Pop(ctx, queen.PopRequest{Queue: "q0", Group: "g1", SubscriptionMode: "sometimes"})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Pop(mctx, queen.PopRequest{Queue: "q0", Group: "g1", SubscriptionMode: "sometimes"})
			return err
		}},
		{`b.Pop(ctx, queen.PopRequest{})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Pop(mctx, queen.PopRequest{}); return err }},
		{`b.Pop(ctx, queen.PopRequest{Queue: "q0", Timeout: -1})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Pop(mctx, queen.PopRequest{Queue: "q0", Timeout: -1}); return err }},
		{`b.AckBatch(ctx, []queen.AckItem{{PartitionID: "p"}})`, queen.ErrInvalidArgument, func() error { _, err := m.b.AckBatch(mctx, []queen.AckItem{{PartitionID: "p"}}); return err }},
		{`b.AckBatch(ctx, []queen.AckItem{{TransactionID: "t", PartitionID: "p", Delay: -time.Second}})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.AckBatch(mctx, []queen.AckItem{{TransactionID: "t", PartitionID: "p", Delay: -time.Second}})
			return err
		}},
		{`b.AckBatch(ctx, make([]queen.AckItem, queen.MaxAckItems+1))`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.AckBatch(mctx, make([]queen.AckItem, queen.MaxAckItems+1))
			return err
		}},
		{`b.Ack(ctx, nil, true, queen.AckOptions{})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Ack(mctx, nil, true, queen.AckOptions{}); return err }},
		{`b.RenewLease(ctx, "x", -time.Second)`, queen.ErrInvalidArgument, func() error { _, err := m.b.RenewLease(mctx, "x", -time.Second); return err }},
		{`b.Renew(ctx, &queen.Message{Queue: "q0"})`, queen.ErrInvalidArgument, func() error { _, err := m.b.Renew(mctx, &queen.Message{Queue: "q0"}); return err }},
		{`b.Fetch(ctx, "q0", "a", -1, 0)`, queen.ErrInvalidArgument, func() error { _, err := m.b.Fetch(mctx, "q0", "a", -1, 0); return err }},
		{`b.SeekPartition(ctx, "g1", "q0", "", queen.SeekOptions{})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.SeekPartition(mctx, "g1", "q0", "", queen.SeekOptions{})
			return err
		}},
		{`b.SetGroupSubscription(ctx, "g1", time.Time{})`, queen.ErrInvalidArgument, func() error { _, err := m.b.SetGroupSubscription(mctx, "g1", time.Time{}); return err }},
		{`b.ConfigureQueue(ctx, "q0", queen.QueueConfig{MaxSize: -1})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.ConfigureQueue(mctx, "q0", queen.QueueConfig{MaxSize: -1})
			return err
		}},
		{`b.ConfigureQueue(ctx, "", queen.QueueConfig{})`, queen.ErrInvalidArgument, func() error { _, err := m.b.ConfigureQueue(mctx, "", queen.QueueConfig{}); return err }},
		{`b.ExecTransaction(ctx, nil)`, queen.ErrInvalidArgument, func() error { _, err := m.b.ExecTransaction(mctx, nil); return err }},
		{`b.ExecTransaction(ctx, []queen.TxOp{{}})`, queen.ErrInvalidArgument, func() error { _, err := m.b.ExecTransaction(mctx, []queen.TxOp{{}}); return err }},
		{`b.Transaction().Ack(msg, "completed", queen.AckOptions{}).Push(queen.PushItem{Queue: ""}).Commit(ctx)`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Transaction().Ack(msg, queen.AckCompleted, queen.AckOptions{}).Push(queen.PushItem{Queue: ""}).Commit(mctx)
			return err
		}},
		{`b.ListMessages(ctx, queen.MessageFilter{Limit: -1})`, queen.ErrInvalidArgument, func() error { _, err := m.b.ListMessages(mctx, queen.MessageFilter{Limit: -1}); return err }},
		{`b.ListMessages(ctx, queen.MessageFilter{Status: "weird"})`, queen.ErrInvalidArgument, func() error { _, err := m.b.ListMessages(mctx, queen.MessageFilter{Status: "weird"}); return err }},
		{`b.DeadLetters(ctx, queen.LetterFilter{Offset: -1})`, queen.ErrInvalidArgument, func() error { _, err := m.b.DeadLetters(mctx, queen.LetterFilter{Offset: -1}); return err }},
		{`b.RecordTrace(ctx, queen.TraceEvent{})`, queen.ErrInvalidArgument, func() error { _, err := m.b.RecordTrace(mctx, queen.TraceEvent{}); return err }},
		{`b.TracesByName(ctx, "n1", -1, 0)`, queen.ErrInvalidArgument, func() error { _, err := m.b.TracesByName(mctx, "n1", -1, 0); return err }},
		{`b.TraceNames(ctx, 0, -1)`, queen.ErrInvalidArgument, func() error { _, err := m.b.TraceNames(mctx, 0, -1); return err }},
		{`b.Queue("q0").Batch(-1).Pop(ctx)`, queen.ErrInvalidArgument, func() error { _, err := m.b.Queue("q0").Batch(-1).Pop(mctx); return err }},
		{`b.Admin().SeekConsumerGroup(ctx, "g1", "q0", queen.SeekConsumerGroupOptions{Timestamp: "soon"})`, queen.ErrInvalidArgument, func() error {
			_, err := m.b.Admin().SeekConsumerGroup(mctx, "g1", "q0", queen.SeekConsumerGroupOptions{Timestamp: "soon"})
			return err
		}},
	}
	c := calls[r.IntN(len(calls))]
	m.emit("// invalid input")
	m.emit("_ = %q", c.code)
	err := c.fn()
	if !errors.Is(err, c.want) {
		m.failf("invalid", "%s: %v, want %v", c.code, err, c.want)
	}
}

func (m *seqModel) opMaintenance(r *rand.Rand) {
	on := !m.maint
	if r.IntN(4) == 0 {
		on = m.maint // the same again
	}
	if w := m.waiter; on && w != nil {
		if q := m.queues[w.req.Queue]; q == nil || q.groups[groupOf(w.req.Group)] == nil {
			m.opWaitCancel() // keep joins out of maintenance mode
		}
	}
	m.setMaintenance(on)
}

func (m *seqModel) setMaintenance(on bool) {
	m.emit("require.NoError(t, b.SetMaintenanceMode(ctx, %v))", on)
	if err := m.b.SetMaintenanceMode(mctx, on); err != nil {
		m.failf("maintenance", "SetMaintenanceMode(%v): %v", on, err)
		return
	}
	m.maint = on
	if m.b.MaintenanceMode() != on {
		m.failf("maintenance", "MaintenanceMode() is %v after SetMaintenanceMode(%v)", m.b.MaintenanceMode(), on)
	}
}

// snapshot is what a broker reports that a restart must not change,
// as sorted "key value" lines.
func (m *seqModel) snapshot() map[string]string {
	out := map[string]string{}
	for _, q := range m.sortedQueues() {
		info, err := m.b.DescribeQueue(mctx, q.name)
		if err != nil {
			m.failf("snapshot", "DescribeQueue(%s): %v", q.name, err)
			return out
		}
		cfg, _ := json.Marshal(info.Config)
		out["queue "+q.name] = fmt.Sprintf("%s %v %s %s", info.ID, info.CreatedAt.UnixMicro(), cfg, info.DefaultPartitionID)
		qs, err := m.b.QueueStats(mctx, q.name)
		if err != nil {
			m.failf("snapshot", "QueueStats(%s): %v", q.name, err)
			return out
		}
		out["stats "+q.name] = fmt.Sprintf("%d %d %d %d %d %v", qs.Messages, qs.Pending, qs.DeadLetters, qs.Parked, qs.PartitionN, qs.Groups)
		for _, ps := range qs.Partitions {
			p := q.parts[ps.Name]
			out["partition "+q.name+"/"+ps.Name] = fmt.Sprintf("%s %d %d %d %d", ps.ID, ps.CreatedAt.UnixMicro(), ps.Messages, ps.FirstOffset, ps.NextOffset)
			out["lastpush "+q.name+"/"+ps.Name] = fmt.Sprint(ps.LastPushAt.UnixMicro())
			for _, cs := range ps.Cursors {
				off := cs.Offset
				if p != nil {
					off = p.norm(off)
				}
				out["cursor "+q.name+"/"+ps.Name+"/"+cs.Group] = fmt.Sprintf("%d %d %d %d %d", off, cs.Lag, cs.Retries, cs.Consumed, cs.LastAckAt.UnixMicro())
			}
			res, err := m.b.Fetch(mctx, q.name, ps.Name, 0, 1000)
			if err != nil {
				m.failf("snapshot", "Fetch: %v", err)
				return out
			}
			for _, rec := range res.Records {
				out[fmt.Sprintf("record %s/%s@%d", q.name, ps.Name, rec.Offset)] = fmt.Sprintf("%s %s %s %d", rec.MessageID, rec.TransactionID, rec.Payload, rec.CreatedAt.UnixMicro())
			}
		}
		for kind, list := range map[string]func() (*queen.LetterPage, error){
			"dl": func() (*queen.LetterPage, error) {
				return m.b.DeadLetters(mctx, queen.LetterFilter{Queue: q.name, Limit: 1000})
			},
			"pk": func() (*queen.LetterPage, error) {
				return m.b.ParkedMessages(mctx, queen.LetterFilter{Queue: q.name, Limit: 1000})
			},
		} {
			page, err := list()
			if err != nil {
				m.failf("snapshot", "letters: %v", err)
				return out
			}
			for _, e := range page.Letters {
				out[kind+" "+e.ID] = fmt.Sprintf("%s %s %s %d %s %d %s %d %d", e.ConsumerGroup, e.Partition, e.PartitionID, e.Offset, e.Error, e.RetryCount, e.Payload, e.CreatedAt.UnixMicro(), e.FailedAt.UnixMicro())
			}
		}
	}
	gs, err := m.b.ListGroups(mctx, queen.GroupFilter{})
	if err != nil {
		m.failf("snapshot", "ListGroups: %v", err)
		return out
	}
	for _, g := range gs {
		out["group "+g.Queue+"/"+g.Group] = fmt.Sprintf("%s %d %d %v %d %d %d", g.Mode, g.From.UnixMicro(), g.JoinedAt.UnixMicro(), g.Conflation, g.Lag, g.Consumed, g.LastAckAt.UnixMicro())
	}
	return out
}

func (m *seqModel) opReopen() {
	if !m.disk || m.closed {
		return
	}
	m.verify()
	pre := m.snapshot()
	if m.fail != nil {
		return
	}
	w := m.waiter
	m.waiter = nil
	m.emit("require.NoError(t, b.Close())")
	if err := m.b.Close(); err != nil {
		m.failf("close", "Close: %v", err)
		return
	}
	if w != nil {
		m.emit("wr%s := recv(w%s)", w.v, w.v)
		m.emit("require.ErrorIs(t, wr%s.err, queen.ErrClosed)", w.v)
		select {
		case a := <-w.ch:
			if !errors.Is(a.err, queen.ErrClosed) {
				m.failf("close.waiter", "a waiting pop ended by Close returned %v with %d messages", a.err, msgCount(a.res))
			}
		case <-time.After(5 * time.Second):
			m.failf("close.waiter", "Close left a waiting pop waiting")
			return
		}
		w.cancel()
	}
	m.checkClosed()
	m.emit("b, err = queen.Open(dir, opts)")
	m.emit("require.NoError(t, err)")
	b, err := queen.Open(m.dir, m.opts)
	if err != nil {
		m.failf("reopen", "Open: %v", err)
		m.closed = true
		return
	}
	m.b = b
	m.counts["+reopened"]++
	// What a restart forgets: leases, delivery counts, retry delays.
	for _, l := range m.leases {
		if !l.released {
			l.lost = true
		}
	}
	for _, q := range m.sortedQueues() {
		for _, g := range q.groups {
			for _, p := range q.partList() {
				c := g.cursors[p.name]
				if c == nil {
					continue
				}
				c.lease, c.flights, c.notBefore = nil, nil, 0
				clear(c.att)
			}
		}
	}
	m.counters = smCounters{acked: map[queen.AckStatus]int64{}}
	clear(m.early) // remembered in memory only
	// maintenance mode is stored: it stays as it was
	post := m.snapshot()
	for k, v := range pre {
		if post[k] != v {
			m.failf("reopen.changed", "after Close and Open, %s is %q, was %q", k, post[k], v)
		}
	}
	for k, v := range post {
		if _, ok := pre[k]; !ok {
			m.failf("reopen.changed", "after Close and Open, %s appeared: %q", k, v)
		}
	}
	m.verify()
}

// checkClosed checks a closed broker refuses everything with ErrClosed.
func (m *seqModel) checkClosed() {
	m.emit("_, err = b.Push(ctx, []queen.PushItem{{Queue: \"q0\"}})")
	m.emit("require.ErrorIs(t, err, queen.ErrClosed)")
	b := m.b
	checks := map[string]error{
		"Push": func() error { _, err := b.Push(mctx, []queen.PushItem{{Queue: "q0"}}); return err }(),
		"Pop": func() error {
			_, err := b.Pop(mctx, queen.PopRequest{Queue: "q0", Wait: true, Timeout: time.Second})
			return err
		}(),
		"AckBatch": func() error {
			_, err := b.AckBatch(mctx, []queen.AckItem{{TransactionID: "t", PartitionID: "p"}})
			return err
		}(),
		"Ping":       b.Ping(mctx),
		"QueueStats": func() error { _, err := b.QueueStats(mctx, "q0"); return err }(),
		"Maintain":   b.Maintain(mctx),
		"RenewLease": func() error { _, err := b.RenewLease(mctx, "x", 0); return err }(),
		"Seek":       func() error { _, err := b.SeekGroup(mctx, "g1", "q0", queen.SeekOptions{}); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, queen.ErrClosed) {
			m.failf("closed", "%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := b.Close(); err != nil {
		m.failf("closed", "second Close: %v", err)
	}
}

// finish drains every group (each must get everything left: eventual
// delivery), compares everything, and closes the broker.
func (m *seqModel) finish() {
	if m.waiter != nil {
		m.opWaitCancel()
	}
	if m.fail != nil {
		return
	}
	m.emit("// drain")
	if m.maint {
		m.setMaintenance(false)
	}
	m.advance(2 * time.Hour)
	for _, q := range m.sortedQueues() {
		for _, gn := range q.groupNames() {
			g := q.groups[gn]
			misses := 0
			for round := 0; round < 300 && m.fail == nil; round++ {
				if !m.hasWork(q, g) {
					break
				}
				req := queen.PopRequest{Queue: q.name, Group: g.api(), Batch: 50, Partitions: 10, Conflation: g.conflation}
				m.nextVar++
				v := fmt.Sprintf("d%d", m.nextVar)
				m.emit("%s, err := b.Pop(ctx, %s)", v, m.gpop(req))
				m.emit("require.NoError(t, err)")
				res, err := m.b.Pop(mctx, req)
				if err != nil {
					m.failf("drain.err", "drain pop: %v", err)
					return
				}
				m.counters.popped += int64(len(res.Messages))
				h := m.popCheck("drain pop "+m.gpop(req), q, g, req, res, true, func(k int) string { return fmt.Sprintf("%s.Messages[%d]", v, k) }, v+".LeaseID")
				if h == nil {
					if misses++; misses > 2 {
						m.failf("drain.stuck", "the broker gives %s of %s nothing, model says messages remain", g.name, q.name)
						break
					}
					m.advance(time.Hour)
					continue
				}
				misses = 0
				items := ackItems(h.msgs, queen.AckCompleted)
				want, _ := m.settle(items, false)
				s := make([]string, len(items))
				for j, it := range items {
					s[j] = gack(it, h.exprs[j], h.lexpr)
				}
				m.emit("_, err = b.AckBatch(ctx, []queen.AckItem{%s})", strings.Join(s, ", "))
				res2, err := m.b.AckBatch(mctx, items)
				if err != nil {
					m.failf("drain.err", "drain ack: %v", err)
					return
				}
				m.checkAcks("drain ack", items, h.msgs, res2, want)
				for j, w := range want {
					if w.counted && res2[j].Success {
						m.counters.acked[queen.AckCompleted]++
					}
				}
			}
		}
	}
	m.quick()
	m.verify()
	if m.fail != nil || m.closed {
		return
	}
	m.emit("require.NoError(t, b.Close())")
	if err := m.b.Close(); err != nil {
		m.failf("close", "Close: %v", err)
	}
	m.closed = true
	m.checkClosed()
}

// hasWork reports whether g has anything left to read in q.
func (m *seqModel) hasWork(q *smQueue, g *smGroup) bool {
	for _, p := range q.partList() {
		if c := g.cursors[p.name]; c != nil && m.head(g, p, c) >= 0 {
			return true
		}
	}
	return false
}
