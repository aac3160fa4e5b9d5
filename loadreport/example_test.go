package loadreport_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/tailcut/hedge/loadreport"
)

// A server without a queue of the toolkit's reports its load with
// Handler; a client reads each answer's report with Parse (hedgehttp's
// Transport does, and passes it to its Hedger).
func ExampleHandler() {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	h, err := loadreport.Handler(app, 4) // the server runs 4 requests at once
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))

	v := rec.Result().Header.Get(loadreport.Header)
	fmt.Println(v)
	l, err := loadreport.Parse(v)
	fmt.Printf("%+v %v\n", l, err)
	// Output:
	// TEXT application_utilization=0.000, named_metrics.hedge_running=0, named_metrics.hedge_queued=0, named_metrics.hedge_workers=4, named_metrics.hedge_done=0
	// {Running:0 Queued:0 Workers:4 Done:0} <nil>
}

// Parse reads any ORCA server's TEXT report: a utilization alone reads
// as a server of 100 workers.
func ExampleParse() {
	l, err := loadreport.Parse("TEXT cpu_utilization=0.62, mem_utilization=0.4, rps_fractional=350")
	fmt.Printf("%+v %v\n", l, err)
	_, err = loadreport.Parse(`JSON {"cpu_utilization": 0.62}`)
	fmt.Println(err)
	// Output:
	// {Running:62 Queued:0 Workers:100 Done:0} <nil>
	// loadreport: malformed load report: "JSON {\"cpu_utilization\": 0.62}": only ORCA's TEXT form ("TEXT key=value, ...") is read, not its JSON or BIN forms
}
