// Package verbatim embeds JSON values byte for byte in the JSON that
// encoding/json writes. encoding/json rewrites the bytes a json.RawMessage
// (or any Marshaler) gives it: it compacts them and escapes <, >, &,
// U+2028 and U+2029. A payload, though, is stored and returned byte for
// byte (queen.PushItem.Payload), and it is valid JSON (checked at push),
// so it can be written into a JSON document as it is: its whitespace is
// legal JSON, and the escapes encoding/json adds are for embedding JSON
// in HTML <script> elements and in JavaScript source, not for JSON read
// by a JSON parser (JSON.parse, json.loads, encoding/json), which is how
// Queen's clients read it. (A payload with invalid UTF-8 in a string,
// which json.Valid accepts, was never rewritten either: encoding/json
// copies it as it is.)
//
// [JSON] marshals as a placeholder string that encoding/json writes
// unchanged; [Marshal] runs json.Marshal and then replaces each
// placeholder with the value's bytes. A placeholder begins with a key
// drawn at random when the process starts, behind the escape \/, which
// encoding/json never writes for a Go string: no string marshaled, nor
// any other value, can be taken for one.
package verbatim

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
)

// JSON is a valid JSON value that [Marshal] writes byte for byte; empty,
// it is written as null. Marshaled by json.Marshal, not [Marshal], it
// comes out as a placeholder string.
type JSON []byte

// prefix opens every placeholder: a quote, the escape \/, a random key
// and a colon; the value follows in base64 (no quotes, no escapes) and a
// quote closes it.
var prefix = func() []byte {
	var key [16]byte
	_, _ = rand.Read(key[:])
	return []byte(`"\/` + hex.EncodeToString(key[:]) + ":")
}()

// MarshalJSON writes the placeholder of v.
func (v JSON) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	b := make([]byte, 0, len(prefix)+base64.StdEncoding.EncodedLen(len(v))+1)
	b = append(b, prefix...)
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"'), nil
}

// Marshal returns v as json.Marshal writes it, but with every [JSON] in it
// written as it is.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	i := bytes.Index(b, prefix)
	if i < 0 {
		return b, nil
	}
	out := make([]byte, 0, len(b))
	for i >= 0 {
		out = append(out, b[:i]...)
		b = b[i+len(prefix):]
		end := bytes.IndexByte(b, '"')                           // base64 has no quote
		out, err = base64.StdEncoding.AppendDecode(out, b[:end]) // we encoded it
		if err != nil {
			return nil, err
		}
		b = b[end+1:]
		i = bytes.Index(b, prefix)
	}
	return append(out, b...), nil
}
