package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the import path prefix of the repository's module.
const modulePath = "github.com/compactorhq/compactor"

// TestConsumerModule builds testdata/consumer as a user would: a module of
// its own (go mod init), requiring this repository's module through a
// replace directive, tidied with the go command, with docs/api.md's "Using the
// API from Go" program as a second package that must compile; then runs it
// against the test server over Connect, gRPC and gRPC-Web. It also checks what the
// requirement does to the user's go.mod: the go line rises no higher than
// this module's (a release's .0, not a patch level) and the protobuf and
// Connect runtimes are released versions, not pre-release pseudo-versions.
func TestConsumerModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module with the go command (tens of seconds on a busy machine); runs without -short, as scripts/test.sh does")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH: %v", err)
	}
	root := moduleRoot(t)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "consumer", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	// The program of docs/api.md's "Using the API from Go", as a second package
	// of the consumer module: it must compile as written.
	readme := readFile(t, filepath.Join(root, "docs", "api.md"))
	prog := readmeProgram(t, readme, "## Using the API from Go")
	if err := os.MkdirAll(filepath.Join(dir, "readme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "readme", "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	// The repository's checksums, so that tidy needs no checksum database
	// (it keeps only the lines the consumer needs). The module cache and
	// the proxy from the environment serve the modules themselves.
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "init", "example.com/consumer")
	// A module that still supports an older Go (go mod init writes the
	// local toolchain's full version, which hides any rise).
	const before = "1.25.0"
	goCmd("mod", "edit", "-go="+before)
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd("mod", "edit", "-require="+modulePath+"@v0.0.0-00010101000000-000000000000", "-replace="+modulePath+"="+root)
	goCmd("mod", "tidy")

	gomod := readFile(t, filepath.Join(dir, "go.mod"))
	rootMod := readFile(t, filepath.Join(root, "go.mod"))
	t.Logf("consumer go.mod after tidy (it said go %s before):\n%s", before, gomod)
	// Requiring a module raises the go line to that module's when it is
	// higher, and no further.
	want := goLine(t, rootMod)
	if compareGo(before, want) > 0 {
		want = before
	}
	if got := goLine(t, gomod); got != want {
		t.Errorf("the consumer's go line is %s, want %s (it said %s before; this module says %s)", got, want, before, goLine(t, rootMod))
	} else if !releaseGoLine.MatchString(got) {
		t.Errorf("the consumer's go line was forced to go %s, a patch level; want a release's (x.y.0)", got)
	}
	for _, path := range []string{"google.golang.org/protobuf", "connectrpc.com/connect"} {
		v := requiredVersion(t, gomod, path)
		if pseudoVersion.MatchString(v) || strings.Contains(v, "-rc") || strings.Contains(v, "-beta") {
			t.Errorf("the consumer's go.mod requires %s %s, a pre-release; want a released version", path, v)
		}
		if want := requiredVersion(t, rootMod, path); v != want {
			t.Errorf("the consumer's go.mod requires %s %s; this module requires %s", path, v, want)
		}
	}

	goCmd("vet", "./...") // compiles both packages
	bin := filepath.Join(dir, "consumer")
	goCmd("build", "-o", bin, ".")
	cmd := exec.Command(bin, baseURL, token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("consumer: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var wantOut strings.Builder
	for _, p := range []string{"connect", "grpc", "grpcweb"} {
		wantOut.WriteString(p + ": pushed 3, JOB_STATE_SUCCEEDED, read 3, wrote 1, version 1\n")
		wantOut.WriteString(p + ": invalid_argument, field records[0].embedding\n")
		wantOut.WriteString(p + ": without the token: unauthenticated\n")
	}
	if got := stdout.String(); got != wantOut.String() {
		t.Errorf("consumer printed:\n%s\nwant:\n%s\nstderr:\n%s", got, wantOut.String(), stderr.String())
	}
}

// readmeProgram returns the first Go code block of the docs/api.md section that
// starts with heading.
func readmeProgram(t *testing.T, readme, heading string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/api.md has no section %q", heading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatalf("docs/api.md section %q has no Go code block", heading)
	}
	code, _, ok = strings.Cut(code, "```")
	if !ok {
		t.Fatalf("docs/api.md section %q: unterminated code block", heading)
	}
	return code
}

// releaseGoLine matches a go line that names a release, not a patch level.
var releaseGoLine = regexp.MustCompile(`^\d+\.\d+(\.0)?$`)

// pseudoVersion matches a Go pseudo-version (vX.Y.Z-[0.]yyyymmddhhmmss-abcdefabcdef).
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}$`)

// moduleRoot is the directory of the repository's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not in a module")
	}
	return filepath.Dir(gomod)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goLine returns the version of the go directive of a go.mod.
func goLine(t *testing.T, gomod string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindStringSubmatch(gomod)
	if m == nil {
		t.Fatalf("no go directive in:\n%s", gomod)
	}
	return m[1]
}

// requiredVersion returns the version of path that a go.mod requires.
func requiredVersion(t *testing.T, gomod, path string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(?:require)?\s+` + regexp.QuoteMeta(path) + `\s+(\S+)`).FindStringSubmatch(gomod)
	if m == nil {
		t.Fatalf("go.mod requires no %s:\n%s", path, gomod)
	}
	return m[1]
}

// compareGo compares two go directive versions ("1.26", "1.26.0", "1.26.8")
// numerically, a missing part counting as 0.
func compareGo(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
