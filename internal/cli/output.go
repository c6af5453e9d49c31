package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

// outputHelp is appended to the help of every client command; the root's
// help (RootHelp) says the rest once.
const outputHelp = `
Output (-o table or json), flag precedence and exit status: see compactor --help.`

// output writes a command's results in the chosen format.
type output struct {
	w    io.Writer // stdout
	errw io.Writer // stderr
	json bool
	now  func() time.Time
}

func newOutput(g *globals) *output {
	return &output{w: g.streams.Out, errw: g.streams.Err, json: g.output == "json", now: time.Now}
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

// writeProtoState writes m as one JSON object with every field, those at
// their zero value included: for a state whose zero values say something
// (no cap set), so that it never prints as {}.
func (o *output) writeProtoState(m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	return o.writeJSON(json.RawMessage(buf.Bytes()))
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
func ellipsize(s string, n int) string { return format.Truncate(s, n) }

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
	return t.Format("2006-01-02T15:04:05Z") + " (" + format.Relative(o.now().Sub(t)) + ")"
}

// parseEnum finds the value of an enum (values: its generated name map)
// named s: the value's name with or without prefix, in any case, with '-'
// for '_' ("one-off", "ONE_OFF" and "TRIGGER_ONE_OFF" name TRIGGER_ONE_OFF).
// ok is false for an unknown name and for the enum's zero value
// (UNSPECIFIED).
func parseEnum[E ~int32](s, prefix string, values map[string]int32) (E, bool) {
	name := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	if !strings.HasPrefix(name, prefix) {
		name = prefix + name
	}
	v, ok := values[name]
	if !ok || v == 0 {
		return 0, false
	}
	return E(v), true
}

// stateName is a job state without its enum prefix: "RUNNING".
func stateName(s compactorv1.JobState) string {
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

// kindName is a job kind without its enum prefix: "INDEX_REBUILD";
// "UNKNOWN" for a kind this client does not know.
func kindName(k compactorv1.JobKind) string {
	if k == compactorv1.JobKind_JOB_KIND_UNSPECIFIED {
		return "UNKNOWN"
	}
	return strings.TrimPrefix(k.String(), "JOB_KIND_")
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
		return format.Duration(j.GetFinishTime().AsTime().Sub(j.GetStartTime().AsTime()))
	case j.GetStartTime() != nil:
		return format.Duration(o.now().Sub(j.GetStartTime().AsTime()))
	case j.GetFinishTime() == nil && j.GetCreateTime() != nil:
		return "queued " + format.Duration(o.now().Sub(j.GetCreateTime().AsTime()))
	}
	return "-"
}

// progressText is a running job's progress: "45% writing blocks, 4500 of
// 10000 records read, ETA 3.2s".
func progressText(p *compactorv1.Progress) string {
	if p == nil {
		return ""
	}
	var parts []string
	if f, ok := jobFraction(p); ok {
		parts = append(parts, fmt.Sprintf("%d%%", int(f*100)))
	}
	if p.GetPhase() != "" {
		parts = append(parts, safeText(p.GetPhase()))
	}
	s := strings.Join(parts, " ")
	if s != "" {
		s += ", "
	}
	switch {
	case p.GetVectorsTotal() > 0:
		s += fmt.Sprintf("%d of %d vectors indexed", p.GetVectorsIndexed(), p.GetVectorsTotal())
	case p.GetRecordsTotal() > 0:
		s += fmt.Sprintf("%d of %d records read", p.GetRecordsRead(), p.GetRecordsTotal())
	default:
		s += plural(p.GetRecordsRead(), "record") + " read"
	}
	return s + ", " + etaText(p)
}

// jobFraction is the fraction of a job done, from 0 to 1: the whole-job
// Progress.fraction, or, from a server that does not send it (0), records
// read of records total. ok is false when neither is known.
func jobFraction(p *compactorv1.Progress) (f float64, ok bool) {
	switch {
	case p.GetFraction() > 0:
		return min(p.GetFraction(), 1), true
	case p.GetRecordsTotal() > 0:
		return min(float64(p.GetRecordsRead())/float64(p.GetRecordsTotal()), 1), true
	}
	return 0, false
}

// etaText is "ETA 3.2s" from Progress.eta, or "ETA unknown" while the
// server cannot estimate it (unset), never "ETA 0s" for an unknown one.
func etaText(p *compactorv1.Progress) string { return etaTextAged(p, 0) }

// etaTextAged is etaText for a progress report received age ago: its ETA
// counts down from when it arrived, and once it has run out while the job
// still runs (no newer report since) it is "ETA overdue by 12s", never a
// stale "ETA <1s".
func etaTextAged(p *compactorv1.Progress, age time.Duration) string {
	if p.GetEta() == nil {
		return "ETA unknown"
	}
	left := p.GetEta().AsDuration() - max(age, 0)
	switch {
	case left <= -time.Second:
		return "ETA overdue by " + format.Duration((-left).Round(time.Second))
	case left < time.Second:
		return "ETA <1s"
	}
	return "ETA " + format.Duration(left)
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
func plural(n int64, noun string) string { return format.Plural(n, noun) }
