package httpapi

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

var splitSeeds = []string{
	`{}`, ` { } `, `[]`, ` [ ] `, `{"a":1}`, `{"a":1,"a":2}`, `{"a" : "x" , "b":null,"c":true,"d":false}`,
	`{"acknowledgments":[{"transactionId":"t1","partitionId":"p","status":"completed"},{"transactionId":"t\"2"}],"consumerGroup":"g"}`,
	`{"k":{"n":[1,2,{"x":"]}"}]},"z":-1.5e+3}`, `{"esc\"aped":1}`, `{"ünï":1}`, `{"s":"a\\"}`, `{"s":"\\\\"}`,
	`[1,"two",[3],{"four":4},null,true]`, "\t[\n1\r,\n2 ]\n", `null`, `"str"`, `12`, `[{"a":[]},{}]`, `{"a":[],"b":{}}`,
	`{"s":"\u00e9\ud83d\ude00"}`, `{"": ""}`,
}

// checkSplit compares the scanners with json.Unmarshal on a valid body.
func checkSplit(t *testing.T, s string) {
	raw := []byte(s)
	if !json.Valid(raw) {
		return
	}
	if kv, ok := splitObject(raw, nil); ok {
		var want map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &want), "%q", s)
		f := &fields{kv: kv}
		for k, v := range want {
			got, ok := f.get(k)
			require.True(t, ok, "%q member %q", s, k)
			require.Equal(t, string(v), string(got), "%q member %q", s, k)
		}
		for _, m := range kv {
			_, ok := want[string(m.key)]
			require.True(t, ok, "%q: member %q is not json.Unmarshal's", s, m.key)
		}
		again, ok := splitObject(raw, kv)
		require.True(t, ok)
		require.Equal(t, append(kv[:len(kv):len(kv)], kv...), again, "%q: members are appended", s)
	}
	if a, n, ok := splitArray(raw, math.MaxInt); ok {
		var want []json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &want), "%q", s)
		require.Equal(t, len(want), len(a), "%q", s)
		require.Equal(t, len(want), n, "%q", s)
		for i := range want {
			require.Equal(t, string(want[i]), string(a[i]), "%q element %d", s, i)
		}
		for max := range len(want) + 1 {
			a, n, ok := splitArray(raw, max)
			require.True(t, ok)
			require.Equal(t, len(want), n, "%q, max %d: the length, whatever max", s, max)
			if n > max {
				require.Nil(t, a, "%q, max %d: no elements past max", s, max)
			} else {
				require.Len(t, a, n)
			}
		}
	}
	if str, ok := simpleString(raw); ok {
		var want string
		require.NoError(t, json.Unmarshal(raw, &want), "%q", s)
		require.Equal(t, want, str)
	}
}

func TestSplit_SameAsUnmarshal(t *testing.T) {
	for _, s := range splitSeeds {
		checkSplit(t, s)
	}
}

// TestSplit_HandlesTheHotPathItself: the bodies of the hot routes never
// need json.Unmarshal (the fallback would be correct, but slow).
func TestSplit_HandlesTheHotPathItself(t *testing.T) {
	body := []byte(`{"consumerGroup":"g","acknowledgments":[{"transactionId":"0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d5e","partitionId":"0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d5f","leaseId":"0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d60","status":"completed"}, {"transactionId":"t2","partitionId":"p","status":"failed","error":"said \"no\", {[x]}","delayMs":250}]}`)
	kv, ok := splitObject(body, nil)
	require.True(t, ok)
	acks, _ := (&fields{kv: kv}).get("acknowledgments")
	elems, _, ok := splitArray(acks, math.MaxInt)
	require.True(t, ok)
	require.Len(t, elems, 2)
	for _, e := range elems {
		kv, ok := splitObject(e, nil)
		require.True(t, ok)
		for _, k := range []string{"transactionId", "partitionId", "status"} {
			v, _ := (&fields{kv: kv}).get(k)
			_, ok := simpleString(v)
			require.True(t, ok, k)
		}
	}
	checkSplit(t, string(body))
}

// FuzzSplit compares the scanners with json.Unmarshal on any valid JSON.
func FuzzSplit(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkSplit(t, s) })
}
