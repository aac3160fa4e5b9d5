package lab_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/tailcut/hedge/internal/lab"
)

// The lab is an http.Handler; "hedge lab" serves it on 127.0.0.1:8080.
func ExampleNew() {
	s, err := lab.New(lab.Options{})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/drill?delay=130ms", nil))
	var r lab.DrillResponse
	json.Unmarshal(rec.Body.Bytes(), &r)
	fmt.Println(rec.Code, r.Outcome, r.P95Ms)
	// Output: 200 TAIL CUT 226
}
