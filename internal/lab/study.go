package lab

//go:generate cp ../../docs/study/results.json study.json

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tailcut/hedge/internal/sim"
)

// embeddedStudy is a copy of docs/study/results.json taken at build time
// ("go generate ./lab" refreshes it; a test fails if they differ).
//
//go:embed study.json
var embeddedStudy []byte

// EmbeddedStudy returns the results.json embedded in the binary.
func EmbeddedStudy() []byte { return embeddedStudy }

// checkStudy verifies that b is a non-empty results.json array.
func checkStudy(b []byte) error {
	var pts []sim.PointResult
	if err := json.Unmarshal(b, &pts); err != nil {
		return fmt.Errorf("study results: not a results.json written by hedge study: %w", err)
	}
	if len(pts) == 0 {
		return errors.New("study results: no points: give a results.json written by hedge study")
	}
	for i, p := range pts {
		if p.World == "" || p.Strategy == "" || p.Load <= 0 {
			return fmt.Errorf("study results: point %d has no world, strategy or load: give a results.json written by hedge study", i)
		}
	}
	return nil
}

func (s *Server) handleStudy(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		f := newForm(r.URL.RawQuery)
		f.unknown()
		if len(f.errs) > 0 {
			writeParamErrors(w, f.errs)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.study)
}
