package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMain keeps the tests hermetic: no COMPACTOR_* variable of the
// environment, and a home and configuration directory of their own, so
// that no client configuration file of the user's is read.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "compactor-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "COMPACTOR_") && name != "COMPACTOR_TEST_POSTGRES_DSN" {
			os.Unsetenv(name)
		}
	}
	os.Setenv("HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir+"/.config")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
