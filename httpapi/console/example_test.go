package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/console"
)

// ExampleNew mounts the console under /ops/console/ next to the API,
// with a token check shared by both, and reads the overview as a browser
// that logged in would.
func ExampleNew() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.Push(context.Background(), []queen.PushItem{{Queue: "orders", Payload: []byte(`{"id":1}`)}}); err != nil {
		panic(err)
	}

	// One hook for both: the console hands it the login cookie's token
	// as a bearer token.
	authorize := func(r *http.Request, level httpapi.Access) error {
		if level == httpapi.AccessPublic || r.Header.Get("Authorization") == "Bearer s3cret" {
			return nil
		}
		return httpapi.ErrUnauthorized
	}
	mux := http.NewServeMux()
	mux.Handle("/queen/", http.StripPrefix("/queen", httpapi.New(b, &httpapi.Options{Authorize: authorize})))
	mux.Handle("/ops/console/", http.StripPrefix("/ops/console", console.New(b, &console.Options{Authorize: authorize})))

	get := func(path, cookie string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	rec := get("/ops/console/", "")
	fmt.Println(rec.Code, rec.Header().Get("Location"))
	rec = get("/ops/console/", "queen_console_token=s3cret")
	fmt.Println(rec.Code, strings.Contains(rec.Body.String(), `<tr data-row="orders">`))
	// Output:
	// 303 /ops/console/login
	// 200 true
}
