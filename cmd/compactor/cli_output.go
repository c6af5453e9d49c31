package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// outputHelp is appended to the help of every client command.
const outputHelp = `
Output: -o table (default) prints aligned tables for people, with times in
UTC and relative hints ("2m ago"). -o json prints exactly one JSON document on
stdout (an array for list commands, an object otherwise; 'watch' prints one
JSON object per line instead), with the API's field names (snake_case, as in
proto/compactor/v1), enum names such as "JOB_STATE_SUCCEEDED", 64-bit integers
as strings and times in RFC 3339 (the protobuf JSON mapping); fields at their
zero value are left out. Progress and notes go to stderr, never stdout.

Exit status: 0 on success, 1 when a call or the command fails, 2 for a usage
error (unknown flag, bad argument).`

// output writes a command's results in the chosen format.
type output struct {
	w    io.Writer // stdout
	errw io.Writer // stderr
	json bool
	now  func() time.Time
}

func newOutput(g *globals) *output {
	return &output{w: g.stdout, errw: g.stderr, json: g.output == "json", now: time.Now}
}

// marshalProto is the protojson form of m (proto field names, zero values
// left out), with its whitespace normalized: protojson deliberately varies
// it between builds, which scripts comparing output should not see.
func marshalProto(m proto.Message) (json.RawMessage, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeJSON writes v as one indented JSON document, with <, > and & as
// they are (the output is for programs, not for an HTML page).
func (o *output) writeJSON(v any) error {
	enc := json.NewEncoder(o.w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeProto writes m as one JSON object.
func (o *output) writeProto(m proto.Message) error {
	raw, err := marshalProto(m)
	if err != nil {
		return err
	}
	return o.writeJSON(raw)
}

// writeProtoList writes ms as one JSON array (an empty one when ms is).
func writeProtoList[M proto.Message](o *output, ms []M) error {
	raws := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		raw, err := marshalProto(m)
		if err != nil {
			return err
		}
		raws = append(raws, raw)
	}
	return o.writeJSON(raws)
}

// writeProtoLine writes m as one compact JSON object on its own line.
func (o *output) writeProtoLine(m proto.Message) error {
	raw, err := marshalProto(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.w, "%s\n", raw)
	return err
}

// table returns an aligned table writer on stdout; Flush it.
func (o *output) table() *tabwriter.Writer {
	return tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
}

// kv prints key/value rows aligned, for one object.
func (o *output) kv(rows [][2]string) error {
	tw := o.table()
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// note prints a line for people on stderr.
func (o *output) note(format string, args ...any) {
	fmt.Fprintf(o.errw, format+"\n", args...)
}

// isTerminal reports whether w is a terminal (progress bars are drawn only
// there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is the width of the terminal w, or 0 when unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// safeText makes text from the server or the input safe for one table cell:
// control characters (tabs, newlines, escape sequences) are escaped, so a
// hostile name can neither break the alignment nor drive the terminal.
func safeText(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// ellipsize shortens s to at most n runes, marking the cut with "…".
func ellipsize(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtTime is t in UTC with a relative hint, or "-" when unset.
func (o *output) fmtTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	t := ts.AsTime().UTC()
	return t.Format("2006-01-02T15:04:05Z") + " (" + relative(o.now().Sub(t)) + ")"
}

// relative is an elapsed time d as "just now", "5s ago", "2m ago", "3h ago",
// "4d ago", or "in 5s" for a time in the future.
func relative(d time.Duration) string {
	if d < 0 {
		if -d < time.Second {
			return "just now"
		}
		return "in " + coarse(-d)
	}
	if d < time.Second {
		return "just now"
	}
	return coarse(d) + " ago"
}

func coarse(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// fmtDuration is d for people: "850ms", "1.2s", "3m12s", "2h5m0s".
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// fmtBytes is n in SI units: "512 B", "1.5 kB", "2.3 MB".
func fmtBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// stateName is a job state without its enum prefix: "RUNNING".
func stateName(s compactorv1.JobState) string {
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

// triggerName is a trigger without its enum prefix: "ONE_OFF".
func triggerName(t compactorv1.Trigger) string {
	return strings.TrimPrefix(t.String(), "TRIGGER_")
}

// jobDone reports whether a job state is final.
func jobDone(s compactorv1.JobState) bool {
	switch s {
	case compactorv1.JobState_JOB_STATE_SUCCEEDED, compactorv1.JobState_JOB_STATE_FAILED, compactorv1.JobState_JOB_STATE_CANCELLED:
		return true
	}
	return false
}

// collectionLabel names a job's collection: its name, or its id when the
// collection has no name any more (deleted).
func collectionLabel(j *compactorv1.Job) string {
	if j.GetCollectionName() != "" {
		return safeText(j.GetCollectionName())
	}
	return j.GetCollectionId()
}

// jobDuration is how long a job ran (finished) or has been running, or how
// long it has waited while QUEUED.
func (o *output) jobDuration(j *compactorv1.Job) string {
	switch {
	case j.GetStartTime() != nil && j.GetFinishTime() != nil:
		return fmtDuration(j.GetFinishTime().AsTime().Sub(j.GetStartTime().AsTime()))
	case j.GetStartTime() != nil:
		return fmtDuration(o.now().Sub(j.GetStartTime().AsTime()))
	case j.GetFinishTime() == nil && j.GetCreateTime() != nil:
		return "queued " + fmtDuration(o.now().Sub(j.GetCreateTime().AsTime()))
	}
	return "-"
}

// progressText is a running job's progress: "45% 4500/10000 writing".
func progressText(p *compactorv1.Progress) string {
	if p == nil {
		return ""
	}
	var s string
	if p.GetRecordsTotal() > 0 {
		s = fmt.Sprintf("%d%% %d/%d", p.GetRecordsRead()*100/p.GetRecordsTotal(), p.GetRecordsRead(), p.GetRecordsTotal())
	} else {
		s = plural(p.GetRecordsRead(), "record") + " read"
	}
	if p.GetPhase() != "" {
		s += ", " + safeText(p.GetPhase())
	}
	return s
}

// jobDetail is the one-cell summary of a job: its progress while running,
// its error when failed, else its note.
func jobDetail(j *compactorv1.Job) string {
	var parts []string
	if j.GetCancelRequested() {
		parts = append(parts, "cancel requested")
	}
	if p := progressText(j.GetProgress()); p != "" {
		parts = append(parts, p)
	}
	if e := j.GetError(); e != "" {
		parts = append(parts, "error: "+ellipsize(safeText(e), 80))
	}
	if n := j.GetNote(); n != "" {
		parts = append(parts, ellipsize(safeText(n), 60))
	}
	return orDash(strings.Join(parts, "; "))
}

// plural is "1 record", "2 records".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return strconv.FormatInt(n, 10) + " " + noun + "es"
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}
