package httpapi

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
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

// validJSONCases are inputs at the edges of the grammar json.Valid checks.
var validJSONCases = []string{
	``, ` `, `null`, `nul`, `nulll`, `true`, `tru`, `false`, `fals`, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e+5`,
	`1E-05`, `-1.5e3`, `1.5e3.2`, `+1`, `"`, `""`, `"a`, `"\"`, `"\\"`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"\/"`,
	"\"\x1f\"", "\"\x7f\xff\"", "\"tab\there\"", `{}`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{,}`,
	`{1:2}`, `{"a":1}x`, ` {"a" : [ 1 , 2 ] } `, "\t\r\n[]\n", `[`, `[]`, `[1,]`, `[,1]`, `[1 2]`, `[[[]]]`, `[[[]]`,
	`{"a":{"b":{"c":[null,true,false,"x",-1e-9]}}}`, `nullnull`, `1 2`, "\x00", "[\"\u2028\"]",
}

func TestValidJSON_MatchesJSONValid(t *testing.T) {
	cases := slices.Clone(validJSONCases)
	for _, n := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		cases = append(cases, strings.Repeat("[", n)+strings.Repeat("]", n),
			strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n))
	}
	for _, c := range cases {
		require.Equal(t, json.Valid([]byte(c)), validJSON([]byte(c)), "%.80q", c)
	}
}

// FuzzValidJSON compares validJSON with json.Valid on any input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", data, got, want)
		}
	})
}
