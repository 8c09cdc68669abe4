package jsonvalue

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// same fails unless DecodeObject answers as json.Unmarshal does: the same
// map, and an error exactly when Unmarshal has one.
func same(t *testing.T, in []byte) {
	t.Helper()
	var want map[string]any
	werr := json.Unmarshal(in, &want)
	got, err := DecodeObject(in)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", in, err, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %#v, encoding/json gives %#v", in, got, want)
	}
}

var seeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+3,"b":[1,2,{"c":null}],"d":true,"e":false}`,
	`{"a":"x\"y\\z\/\b\f\n\r\t"}`, `{"a":"\u00e9\ud83d\ude00"}`, `{"a":"\ud800"}`, `{"é":"ü"}`,
	"{\"a\":\"\xff\"}", "{\"a\":\"\xc3\x28\"}", `{"a":1,"a":{"b":2}}`, `{"a":{"b":1},"a":{"c":2}}`,
	`{"a":1e400}`, `{"a":1e-400}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`,
	`{"a":[1,]}`, `{"a"}`, `{"a":1,}`, `{"a":1}x`, `{"a":1} {}`, `{"a":nul}`, `{"a":tru}`,
	"{\"a\":\"\x01\"}", `{"a":"\x"}`, `{"a":"`, `{`, `{"a":[`, `{"a":[]}`, `{"a":[[[]]]}`,
	`{"a":123456789012345678901234567890}`, `{"a":-0}`, `{"a":0.1e-2}`, `{"a":1E+2}`,
	"\t{\"a\"\n:\r1 }\n", `{"a":"` + strings.Repeat("x", 300) + `"}`,
	strings.Repeat(`{"a":`, 1200) + "1" + strings.Repeat("}", 1200),
	strings.Repeat(`{"a":[`, 600) + "1" + strings.Repeat("]}", 600),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestDecodeObject_AsEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		same(t, []byte(s))
	}
}

// The fast path, not the fallback, decodes the usual objects: a change
// that sent them to encoding/json would pass the test above.
func TestDecodeObject_FastPath(t *testing.T) {
	for _, s := range []string{`{"a":1,"b":"x\ny","c":[true,false,null],"d":{"e":-1.5e3}}`, `{"é":"ü"}`, `{}`} {
		d := decoder{b: []byte(s)}
		d.space()
		if _, ok := d.object(0); !ok || d.i != len(s) {
			t.Errorf("%s: the fast path gave up at %d", s, d.i)
		}
	}
	for _, s := range []string{`{"a":"\u00e9"}`, `{"a":1e400}`, "{\"a\":\"\xff\"}", `{"a":1,}`} {
		d := decoder{b: []byte(s)}
		if _, ok := d.object(0); ok {
			t.Errorf("%s: the fast path decoded what encoding/json must", s)
		}
	}
}

func FuzzDecodeObject(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { same(t, in) })
}

func BenchmarkDecodeObject(b *testing.B) {
	in := []byte(`{"p":"` + strings.Repeat("x", 248) + `"}`)
	small := []byte(`{"id":12345,"sku":"A-17","qty":3,"price":19.99,"tags":["x","y"],"gift":false}`)
	for _, c := range []struct {
		name string
		in   []byte
	}{{"256B", in}, {"order", small}} {
		b.Run(c.name+"/jsonvalue", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeObject(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := json.Unmarshal(c.in, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
