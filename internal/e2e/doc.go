// Package e2e holds end-to-end tests that drive the whole compactor process
// from outside: the real server (catalog, segment store, manager, Connect API
// and status page) started in-process on a loopback port, fed through the
// generated Connect clients, and watched in real headless Chromium.
//
// The browser test needs Chromium (on Debian: apt-get install chromium; or
// set COMPACTOR_CHROME to a Chrome or Chromium binary). Without it the test
// skips, unless COMPACTOR_REQUIRE_BROWSER=1, as in CI, where it fails.
//
//	go test -race -v ./internal/e2e/
//	go test -v ./internal/e2e/ -artifacts -outputdir /tmp/e2e   # keep the screenshots
//	go test ./internal/e2e/ -run Browser -update-screenshot      # rewrite docs/screenshot.png
//
// The replica tests (replicas_test.go, fencing_test.go) run real processes
// instead: the compactor binary built into a temporary directory, several
// `compactor serve` replicas on a fresh PostgreSQL database (created on
// COMPACTOR_TEST_POSTGRES_DSN, default the local server, and dropped at the
// end) and one VersityGW (from $VERSITYGW, PATH or .cache/bin). Without
// PostgreSQL or versitygw they skip, unless CI=true, where they fail.
//
//	go test -race -v -run Replicas ./internal/e2e/
//
// The package has no non-test code.
package e2e
