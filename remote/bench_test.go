package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// The same calls in process (a broker on disk, fsync on every commit) and
// over HTTP to cmd/queen in a child process (its defaults: fsync on every
// commit), so the cost of the remote hop reads off one run; with
// QUEEN_REAL_URL set (see realqueen_test.go), the same calls through
// package remote to Queen's own server too (rows "realqueen"):
//
//	go test -run '^$' -bench . -benchtime 2000x ./remote

// benchClients returns the two clients, in process first.
func benchClients(b *testing.B) []struct {
	name string
	c    queen.Client
} {
	b.Helper()
	broker := itest.OpenDir(b, b.TempDir(), nil)
	rc, err := remote.Dial(startQueen(b), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = rc.Close() })
	clients := []struct {
		name string
		c    queen.Client
	}{{"inprocess", broker}, {"remote", rc}}
	if os.Getenv("QUEEN_REAL_URL") != "" { // and Queen's own server, emptied first (see realqueen_test.go)
		url, reset := realQueen(b)
		reset(b)
		qc, err := remote.Dial(url, nil)
		require.NoError(b, err)
		b.Cleanup(func() { _ = qc.Close() })
		clients = append(clients, struct {
			name string
			c    queen.Client
		}{"realqueen", qc})
	}
	return clients
}

var benchPayload = json.RawMessage(`{"id":12345,"customer":"c-42","items":[{"sku":"A-1","qty":2}],"note":"` +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `"}`)

func BenchmarkPush(b *testing.B) {
	ctx := context.Background()
	for _, bc := range benchClients(b) {
		for _, per := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/%dpercall", bc.name, per), func(b *testing.B) {
				items := make([]queen.PushItem, per)
				for i := range items {
					items[i] = queen.PushItem{Queue: "bench-push", Partition: fmt.Sprintf("p%d", i%10), Payload: benchPayload}
				}
				b.ReportAllocs()
				for b.Loop() {
					res, err := bc.c.Push(ctx, items)
					if err != nil || res[0].Status != queen.PushQueued {
						b.Fatal(err, res[0].Status)
					}
				}
				b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkDrain pops 100 at a time and acks each pop with one batch
// ack, until b.N messages pushed beforehand are consumed.
func BenchmarkDrain(b *testing.B) {
	ctx := context.Background()
	for _, bc := range benchClients(b) {
		b.Run(bc.name+"/pop100+ackbatch", func(b *testing.B) {
			queue := fmt.Sprintf("bench-drain-%d", b.N)
			batch := make([]queen.PushItem, 0, 1000)
			for i := range b.N {
				batch = append(batch, queen.PushItem{Queue: queue, Partition: fmt.Sprintf("p%d", i%10), Payload: benchPayload})
				if len(batch) == cap(batch) || i == b.N-1 {
					_, err := bc.c.Push(ctx, batch)
					require.NoError(b, err)
					batch = batch[:0]
				}
			}
			req := queen.PopRequest{Queue: queue, Batch: 100}
			b.ReportAllocs()
			b.ResetTimer()
			done := 0
			for done < b.N {
				res, err := bc.c.Pop(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Messages) == 0 {
					continue
				}
				items := make([]queen.AckItem, len(res.Messages))
				for i, m := range res.Messages {
					items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID}
				}
				acks, err := bc.c.AckBatch(ctx, items)
				if err != nil || !acks[0].Success {
					b.Fatal(err)
				}
				done += len(items)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
