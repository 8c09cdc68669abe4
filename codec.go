package queen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Payloads are JSON values, stored and delivered byte for byte as pushed:
// [Message.Payload] is exactly what the producer sent, and [Message.Data]
// is that payload decoded as a JSON object, for handlers that want a map.
// Typed handlers ([Typed], [TypedWith]) decode the payload into a Go type
// with a [Codec] before they run; a payload the codec cannot decode is
// parked (see [Park]) and the handler never sees it.

// Codec decodes a message payload into a Go value for a typed handler.
type Codec interface {
	Decode(payload []byte, v any) error
}

// JSONCodec is the default [Codec]: encoding/json.
type JSONCodec struct {
	// DisallowUnknownFields refuses objects with fields the target type
	// does not have.
	DisallowUnknownFields bool
	// UseNumber decodes numbers into [json.Number] in interface values
	// instead of float64.
	UseNumber bool
}

// Decode decodes payload, a single JSON value, into v.
func (c JSONCodec) Decode(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if c.DisallowUnknownFields {
		dec.DisallowUnknownFields()
	}
	if c.UseNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// TypedHandler handles a message whose payload was decoded into v.
type TypedHandler[T any] func(ctx context.Context, msg *Message, v T) error

// Typed adapts fn to a [Handler] that decodes each payload into a T with
// [JSONCodec] first. A payload that does not decode is parked with a
// [*DecodeError] and fn is not called.
func Typed[T any](fn TypedHandler[T]) Handler {
	return TypedWith(JSONCodec{}, fn)
}

// TypedWith is [Typed] with another codec.
func TypedWith[T any](c Codec, fn TypedHandler[T]) Handler {
	typ := reflect.TypeFor[T]().String()
	return func(ctx context.Context, msg *Message) error {
		var v T
		if err := c.Decode(msg.Payload, &v); err != nil {
			return Park(&DecodeError{Type: typ, Err: err})
		}
		return fn(ctx, msg, v)
	}
}

// encodePayload turns a value given to [QueueBuilder.Push] into a payload:
// [json.RawMessage] and []byte are taken as JSON as they are, anything
// else is marshalled.
func encodePayload(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case json.RawMessage:
		return p, nil
	case []byte:
		return json.RawMessage(p), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}
