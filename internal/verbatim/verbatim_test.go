package verbatim_test

import (
	"encoding/json"
	"testing"

	"github.com/queenlite/queen/internal/verbatim"
	"github.com/stretchr/testify/require"
)

var values = []string{
	`null`, `1`, `[1, {"a" : "<&>"}]`, "[1,\n2,\t3]\r\n", `"line` + "\u2028" + `sep"`, `{"k":"\u003c\/"}`,
	"\"bad\xffutf8\"", `"\/not a placeholder"`, `{}`, ` "x" `,
}

// Every JSON value is written as it is, wherever it sits (struct field,
// slice, map value, omitempty), and the rest as json.Marshal writes it.
func TestMarshal_ByteForByte(t *testing.T) {
	type item struct {
		Name string         `json:"name"`
		Data verbatim.JSON  `json:"data"`
		Opt  verbatim.JSON  `json:"opt,omitempty"`
		More map[string]any `json:"more"`
	}
	for _, v := range values {
		in := []item{{Name: `\/ <&>` + v, Data: verbatim.JSON(v), More: map[string]any{"b": verbatim.JSON(v), "a": "\\/"}}, {Data: nil}}
		got, err := verbatim.Marshal(in)
		require.NoError(t, err)
		name, _ := json.Marshal(in[0].Name)
		want := `[{"name":` + string(name) + `,"data":` + v + `,"more":{"a":"\\/","b":` + v + `}},{"name":"","data":null,"more":null}]`
		require.Equal(t, want, string(got))
	}
}

// A value that holds no JSON is json.Marshal's.
func TestMarshal_NoJSON(t *testing.T) {
	in := map[string]any{"s": `"\/x:AAAA"`, "raw": json.RawMessage(`"\/x:AAAA"`)}
	want, err := json.Marshal(in)
	require.NoError(t, err)
	got, err := verbatim.Marshal(in)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
