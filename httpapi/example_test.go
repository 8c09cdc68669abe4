package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
)

// ExampleNew mounts the API under /queen/ on a program's own mux, then
// pushes and pops a message through it.
func ExampleNew() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	mux := http.NewServeMux()
	mux.Handle("/queen/", http.StripPrefix("/queen", httpapi.New(b, nil)))
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })

	send := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec
	}
	rec := send("POST", "/queen/api/v1/push", `{"items":[{"queue":"orders","transactionId":"order-1","payload":{"id":1}}]}`)
	fmt.Println("push:", rec.Code)

	rec = send("GET", "/queen/api/v1/pop/queue/orders?wait=true&timeout=1000", "")
	var pop struct {
		Messages []struct {
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &pop)
	fmt.Println("pop:", rec.Code, pop.Messages[0].TransactionID, string(pop.Messages[0].Data))

	rec = send("GET", "/queen/api/v1/pop/queue/orders", "")
	fmt.Println("pop again:", rec.Code, rec.Body.Len())
	// Output:
	// push: 201
	// pop: 200 order-1 {"id":1}
	// pop again: 204 0
}

// ExampleOptions_authorize refuses writes without a token and admin routes
// to everyone.
func ExampleOptions_authorize() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	h := httpapi.New(b, &httpapi.Options{Authorize: func(r *http.Request, level httpapi.Access) error {
		switch {
		case level <= httpapi.AccessReadOnly:
			return nil
		case r.Header.Get("Authorization") == "":
			return httpapi.ErrUnauthorized
		case level == httpapi.AccessAdmin:
			return errors.New("admins only")
		}
		return nil
	}})
	for _, path := range []string{"/api/v1/resources/queues", "/api/v1/pop/queue/q"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	req := httptest.NewRequest("DELETE", "/api/v1/resources/queues/q", nil)
	req.Header.Set("Authorization", "Bearer x")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// /api/v1/resources/queues 200 {"queues":[]}
	// /api/v1/pop/queue/q 401 {"error":"authentication required"}
	// 403 {"error":"admins only"}
}
