package queen

import (
	"testing"
	"time"
)

// BenchmarkQueueCounters_Pop is what the per-queue counters add to one
// pop of 100 messages and its ack: the lag of each message, the pop and
// the ack counted (compare with BenchmarkBroker_PopAck/batch100, per
// message).
func BenchmarkQueueCounters_Pop(b *testing.B) {
	var t queueTable
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	msgs := make([]*Message, 100)
	for i := range msgs {
		msgs[i] = &Message{CreatedAt: now.Add(-time.Duration(i) * time.Millisecond)}
	}
	b.ReportAllocs()
	for b.Loop() {
		t.countLag("q", msgs, now)
		t.countQueue(Event{Kind: EventPop, Queue: "q", Count: len(msgs)})
		t.countQueue(Event{Kind: EventAck, Queue: "q", Status: AckCompleted, Count: len(msgs)})
	}
}

// BenchmarkQueueCounters_Push is what they add to one push call.
func BenchmarkQueueCounters_Push(b *testing.B) {
	var t queueTable
	b.ReportAllocs()
	for b.Loop() {
		t.countQueue(Event{Kind: EventPush, Queue: "q", Count: 1})
	}
}
