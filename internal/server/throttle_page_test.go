package server_test

import (
	"strings"
	"testing"
)

// The page shows the throughput cap in force on the node, and who set it.
func TestTheDashboardShowsTheThroughputCapInForce(t *testing.T) {
	r := startApp(t, nil)
	if _, _, body := r.get(t, r.base+"/"); strings.Contains(body, `data-testid="throughput-cap"`) {
		t.Fatal("the dashboard shows a cap while none is set")
	}
	if _, err := r.app.Manager.SetMaxThroughput(t.Context(), 2<<20, "alice"); err != nil {
		t.Fatal(err)
	}
	_, _, body := r.get(t, r.base+"/")
	i := strings.Index(body, `data-testid="throughput-cap"`)
	if i < 0 {
		t.Fatalf("no cap on the dashboard after SetMaxThroughput:\n%s", body)
	}
	if note := body[i:min(len(body), i+400)]; !strings.Contains(note, "2.0 MiB/s") || !strings.Contains(note, "alice") {
		t.Errorf("cap note %q, want the cap and who set it", note)
	}
}
