package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
)

// BenchmarkDrain pops 100 messages a call and acks each pop with one
// /api/v1/ack/batch, over a loopback connection, until b.N messages pushed
// beforehand are consumed: the server's cost per drained message. The
// client reads only the three fields an ack needs, by hand, so that a
// CPU profile is mostly the server's (focus on net/http.(*conn).serve):
//
//	go test -run '^$' -bench Drain -benchtime 200000x -cpuprofile cpu.out ./httpapi
func BenchmarkDrain(b *testing.B) {
	ctx := context.Background()
	br := queentest.NewBroker(b, &queen.Options{})
	srv := httptest.NewServer(httpapi.New(br, nil))
	b.Cleanup(srv.Close)
	payload := []byte(`{"id":12345,"customer":"c-42","items":[{"sku":"A-1","qty":2}],"note":"` +
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `"}`)
	items := make([]queen.PushItem, 0, 1000)
	for i := range b.N {
		items = append(items, queen.PushItem{Queue: "bench", Partition: fmt.Sprintf("p%d", i%10), Payload: payload})
		if len(items) == cap(items) || i == b.N-1 {
			if _, err := br.Push(ctx, items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
	client := srv.Client()
	popURL := srv.URL + "/api/v1/pop/queue/bench?batch=100&subscriptionMode=all"
	ackURL := srv.URL + "/api/v1/ack/batch"
	var reply, ack bytes.Buffer
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		reply.Reset()
		if err := roundTrip(client, http.MethodGet, popURL, nil, &reply); err != nil {
			b.Fatal(err)
		}
		ack.Reset()
		ack.WriteString(`{"acknowledgments":[`)
		n := 0
		for rest := reply.Bytes(); ; n++ {
			var tx, pid, lease []byte
			if tx, rest = member(rest, `"transactionId":"`); tx == nil {
				break
			}
			pid, rest = member(rest, `"partitionId":"`)
			lease, rest = member(rest, `"leaseId":"`)
			if n > 0 {
				ack.WriteByte(',')
			}
			fmt.Fprintf(&ack, `{"transactionId":"%s","partitionId":"%s","leaseId":"%s","status":"completed"}`, tx, pid, lease)
		}
		ack.WriteString(`]}`)
		if n == 0 {
			continue
		}
		reply.Reset()
		if err := roundTrip(client, http.MethodPost, ackURL, ack.Bytes(), &reply); err != nil {
			b.Fatal(err)
		}
		if c := bytes.Count(reply.Bytes(), []byte(`"success":true`)); c != n {
			b.Fatalf("%d of %d acks succeeded: %s", c, n, reply.Bytes())
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// roundTrip sends a request and reads a 200 reply into out.
func roundTrip(c *http.Client, method, url string, body []byte, out *bytes.Buffer) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, out.Bytes())
	}
	return nil
}

// member finds the string member that starts with key in a reply and
// returns its value and what follows it (nil when there is none).
func member(b []byte, key string) (val, rest []byte) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return nil, nil
	}
	b = b[i+len(key):]
	j := bytes.IndexByte(b, '"')
	return b[:j], b[j:]
}
