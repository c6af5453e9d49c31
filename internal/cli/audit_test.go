package cli

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/server"
)

// TestAuditListAndVerify: actions of two principals are listed (table and
// -o json with the principal's name and the action), filtered by collection
// and time; a reader is refused; audit verify passes until an event is
// edited in the catalog, then names it and exits 1.
func TestAuditListAndVerify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	line := func(name, role, tok string) string {
		s := sha256.Sum256([]byte(tok))
		return name + " " + role + " " + hex.EncodeToString(s[:]) + "\n"
	}
	if err := os.WriteFile(tokens, []byte(line("alice", "admin", "a-tok")+line("ops", "operator", "o-tok")+line("viewer", "reader", "r-tok")), 0o600); err != nil {
		t.Fatal(err)
	}
	var dataDir string
	addr := startServer(t, func(cfg *server.Config) { cfg.TokensFile, dataDir = tokens, cfg.DataDir })
	id := createCollection(t, addr, "audited", "--token", "a-tok")
	ok(t, addr, "--token", "o-tok", "compact", id, "--reason", "nightly")
	ok(t, addr, "--token", "o-tok", "pause", "--reason", "upgrade")

	type eventJSON struct {
		ID        string `json:"id"`
		Principal string `json:"principal"`
		Role      string `json:"role"`
		Action    string `json:"action"`
		Reason    string `json:"reason"`
		JobID     string `json:"job_id"`
	}
	got := decode[[]eventJSON](t, ok(t, addr, "--token", "o-tok", "-o", "json", "audit").stdout)
	if len(got) != 3 || got[0].Principal != "alice" || got[0].Action != "collection.create" ||
		got[1].Principal != "ops" || got[1].Role != "operator" || got[1].Action != "compact" || got[1].Reason != "nightly" || got[1].JobID == "" ||
		got[2].Action != "pause" || got[2].Reason != "upgrade" {
		t.Fatalf("audit -o json = %+v", got)
	}
	if got := decode[[]eventJSON](t, ok(t, addr, "--token", "o-tok", "-o", "json", "audit", "--collection", "audited").stdout); len(got) != 2 {
		t.Errorf("audit --collection audited: %+v, want the create and the compact", got)
	}
	if got := decode[[]eventJSON](t, ok(t, addr, "--token", "o-tok", "-o", "json", "audit", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)).stdout); len(got) != 0 {
		t.Errorf("audit --since an hour from now: %+v", got)
	}
	table := ok(t, addr, "--token", "o-tok", "audit", "--since", "1h").stdout
	for _, want := range []string{"PRINCIPAL", "ACTION", "alice", "collection.create", "ops", "compact", "nightly", `"scheduler.paused":"true"`} {
		if !strings.Contains(table, want) {
			t.Errorf("audit table lacks %q:\n%s", want, table)
		}
	}
	fails(t, addr, nil, 1, "permission_denied", "--token", "r-tok", "audit")
	if out := ok(t, addr, "--token", "r-tok", "job", got[1].JobID).stdout; !strings.Contains(out, "Triggered by:") || !strings.Contains(out, "ops") {
		t.Errorf("job printed no Triggered by ops:\n%s", out)
	}
	fails(t, addr, nil, 2, "--since", "--token", "o-tok", "audit", "--since", "yesterday")

	out := ok(t, addr, "--token", "o-tok", "audit", "verify").stdout
	if !strings.Contains(out, "ok") || !strings.Contains(out, "3") {
		t.Errorf("audit verify printed:\n%s", out)
	}
	db, err := sql.Open("sqlite", filepath.Join(dataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit_events SET reason = 'routine' WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	fails(t, addr, nil, 1, "audit chain broken at event 2", "--token", "o-tok", "audit", "verify")
}
