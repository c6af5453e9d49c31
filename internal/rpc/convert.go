package rpc

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/redact"
	"github.com/compactorhq/compactor/internal/segment"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// enumTable is a one-to-one mapping between a domain value and an API
// enum value, written once and read both ways.
type enumTable[D, P comparable] struct {
	to   map[D]P
	from map[P]D
}

// newEnumTable returns the table of pairs (domain value: enum value); each
// enum value appears once.
func newEnumTable[D, P comparable](pairs map[D]P) enumTable[D, P] {
	t := enumTable[D, P]{to: pairs, from: make(map[P]D, len(pairs))}
	for d, p := range pairs {
		t.from[p] = d
	}
	return t
}

// toProto is d's enum value; the enum's zero (UNSPECIFIED) for a value
// the table does not know.
func (t enumTable[D, P]) toProto(d D) P { return t.to[d] }

// fromProto is p's domain value; false for a value the table does not
// know (UNSPECIFIED included).
func (t enumTable[D, P]) fromProto(p P) (D, bool) {
	d, ok := t.from[p]
	return d, ok
}

// The API's enums and the domain values they stand for.
var (
	jobStates = newEnumTable(map[catalog.JobState]compactorv1.JobState{
		catalog.JobQueued:    compactorv1.JobState_JOB_STATE_QUEUED,
		catalog.JobRunning:   compactorv1.JobState_JOB_STATE_RUNNING,
		catalog.JobSucceeded: compactorv1.JobState_JOB_STATE_SUCCEEDED,
		catalog.JobFailed:    compactorv1.JobState_JOB_STATE_FAILED,
		catalog.JobCancelled: compactorv1.JobState_JOB_STATE_CANCELLED,
	})
	triggers = newEnumTable(map[catalog.Trigger]compactorv1.Trigger{
		catalog.TriggerScheduled: compactorv1.Trigger_TRIGGER_SCHEDULED,
		catalog.TriggerOneOff:    compactorv1.Trigger_TRIGGER_ONE_OFF,
	})
	jobKinds = newEnumTable(map[jobtype.Kind]compactorv1.JobKind{
		jobtype.KindCompaction:   compactorv1.JobKind_JOB_KIND_COMPACTION,
		jobtype.KindIndexRebuild: compactorv1.JobKind_JOB_KIND_INDEX_REBUILD,
		jobtype.KindVerify:       compactorv1.JobKind_JOB_KIND_VERIFY,
		jobtype.KindRollback:     compactorv1.JobKind_JOB_KIND_ROLLBACK,
	})
	failureClasses = newEnumTable(map[jobtype.FailureClass]compactorv1.FailureClass{
		jobtype.FailureInfrastructure: compactorv1.FailureClass_FAILURE_CLASS_INFRASTRUCTURE,
		jobtype.FailureData:           compactorv1.FailureClass_FAILURE_CLASS_DATA,
		jobtype.FailureInternal:       compactorv1.FailureClass_FAILURE_CLASS_INTERNAL,
	})
)

// triggerFilter is the trigger a ListCompactions filter names: ""
// (no filter) for TRIGGER_UNSPECIFIED, or a value unknown here.
func triggerFilter(t compactorv1.Trigger) catalog.Trigger {
	tr, _ := triggers.fromProto(t)
	return tr
}

// jobKindToProto is k's enum value; "" is a compaction, an unknown kind
// (a newer replica's) JOB_KIND_UNSPECIFIED.
func jobKindToProto(k jobtype.Kind) compactorv1.JobKind {
	if k == "" {
		k = jobtype.KindCompaction
	}
	return jobKinds.toProto(k)
}

// kindsFromProto converts a kinds filter; field names the request's field
// in the INVALID_ARGUMENT of an unknown or unset value.
func kindsFromProto(field string, ks []compactorv1.JobKind) ([]jobtype.Kind, error) {
	var out []jobtype.Kind
	for i, k := range ks {
		kind, ok := jobKinds.fromProto(k)
		if !ok {
			return nil, invalidArgument(fmt.Sprintf("%s[%d]", field, i), "%s is not a job kind", k)
		}
		out = append(out, kind)
	}
	return out, nil
}

func jobToProto(j manager.Job) *compactorv1.Job {
	p := &compactorv1.Job{
		Id:              j.ID,
		Kind:            jobKindToProto(j.Kind),
		CollectionId:    j.CollectionID,
		CollectionName:  j.CollectionName,
		Trigger:         triggers.toProto(j.Trigger),
		State:           jobStates.toProto(j.State),
		Reason:          j.Reason,
		Attempt:         int32(j.Attempt),
		CreateTime:      ts(j.CreatedAt),
		StartTime:       ts(j.StartedAt),
		FinishTime:      ts(j.FinishedAt),
		OffsetStart:     j.OffsetStart,
		OffsetEnd:       j.OffsetEnd,
		RecordsRead:     j.RecordsRead,
		RecordsWritten:  j.RecordsWritten,
		BytesWritten:    j.BytesWritten,
		VersionBefore:   j.VersionBefore,
		VersionAfter:    j.VersionAfter,
		Error:           redactPaths(j.Error),
		Note:            j.Note,
		Node:            j.Node,
		CancelRequested: j.CancelRequested,
		ContinuesJobId:  j.Continues,
		TriggeredBy:     j.TriggeredBy,
	}
	if pr := j.Progress; pr != nil {
		p.Progress = progressToProto(*pr)
	}
	if j.Kind == jobtype.KindIndexRebuild {
		// Params the server wrote; a row it cannot read shows none.
		ip, _ := jobtype.DecodeIndexRebuildParams(j.Params)
		p.IndexRebuild = &compactorv1.IndexRebuildParams{M: int32(ip.M), EfConstruction: int32(ip.EfConstruction)}
	}
	if j.Kind == jobtype.KindVerify {
		vp, _ := jobtype.DecodeVerifyParams(j.Params)
		p.Verify = &compactorv1.VerifyParams{Version: vp.Version, Replay: vp.Replay, Scrub: vp.Scrub}
	}
	p.FailureClass = failureClasses.toProto(j.FailureClass)
	if j.Predicted != nil {
		p.Predicted = predictionToProto(*j.Predicted)
	}
	if a := j.Actual; a != nil && j.State.Finished() {
		p.Actual = &compactorv1.JobActual{BytesRead: a.BytesRead, BytesWritten: a.BytesWritten, BlobGets: a.BlobGets, BlobPuts: a.BlobPuts,
			BlocksWritten: a.BlocksWritten, DeltasWritten: a.DeltasWritten, VectorsIndexed: a.VectorsIndexed,
			IndexDuration: seconds(a.IndexSeconds), IndexBuild: a.IndexBuild}
	}
	return p
}

// redactPaths is redact.Paths, without its regular expression's cost for
// the empty text most jobs carry.
func redactPaths(s string) string {
	if s == "" {
		return ""
	}
	return redact.Paths(s)
}

// seconds is a duration of s seconds (unset for 0 or less).
func seconds(s float64) *durationpb.Duration {
	if s <= 0 {
		return nil
	}
	return durationpb.New(time.Duration(s * float64(time.Second)))
}

// predictionToProto converts a priced estimate; an unknown duration stays
// unset.
func predictionToProto(x jobtype.Prediction) *compactorv1.JobEstimate {
	e := &compactorv1.JobEstimate{
		Records: x.OpRecords, BlocksTotal: int32(x.BlocksTotal), BlocksToRewrite: int32(x.BlocksToRewrite), BytesToRewrite: x.BytesToRewrite,
		LogBytes: x.LogBytes, Delta: x.Delta, RecordsToWrite: x.RecordsToWrite, BlocksToWrite: int32(x.BlocksToWrite),
		BytesRead: x.BytesRead, BytesWritten: x.BytesWritten, IndexBytes: x.IndexBytes, BlobGets: x.BlobGets, BlobPuts: x.BlobPuts,
		WriteAmplification: x.WriteAmplification, VectorsToInsert: x.VectorsToInsert, VectorsToDelete: x.VectorsToDelete,
		Indexed: x.Indexed, IndexFullBuild: x.IndexFullBuild, IndexFullBuildReason: x.IndexFullBuildReason,
		BytesPerSecond: x.BytesPerSecond, VectorsPerSecond: x.VectorsPerSecond, Basis: x.Basis, Window: x.Window,
	}
	if x.SecondsKnown {
		e.PredictedDuration = durationpb.New(time.Duration(x.Seconds * float64(time.Second)))
		e.WriteDuration = seconds(x.WriteSeconds)
		e.IndexDuration = seconds(x.IndexSeconds)
	}
	return e
}

// progressToProto converts a running job's progress; an unknown ETA stays
// unset (never 0).
func progressToProto(pr jobtype.Progress) *compactorv1.Progress {
	out := &compactorv1.Progress{
		RecordsRead: pr.OpRecordsRead, RecordsTotal: pr.OpRecordsTotal, BytesWritten: pr.BytesWritten, Phase: string(pr.Phase),
		Fraction: pr.Fraction, BlocksWritten: pr.BlocksWritten, BlocksTotal: pr.BlocksTotal,
		VectorsIndexed: pr.VectorsIndexed, VectorsTotal: pr.VectorsTotal,
	}
	if pr.ETAKnown && pr.ETA > 0 {
		out.Eta = durationpb.New(pr.ETA)
	}
	return out
}

// indexFiguresToProto converts a version's index reference; nil for none.
func indexFiguresToProto(ix *segment.IndexRef) *compactorv1.IndexFigures {
	if ix == nil {
		return nil
	}
	return &compactorv1.IndexFigures{
		M: int32(ix.M), EfConstruction: int32(ix.EfConstruction), EfSearch: int32(ix.EfSearch),
		Vectors: int64(ix.Vectors), Tombstones: int64(ix.Tombstones), EncodedBytes: ix.Bytes(),
		Build: ix.Build, BuildTime: ts(ix.BuiltAt), BuildDuration: durationpb.New(time.Duration(ix.BuildSeconds * float64(time.Second))),
		JobId: ix.Job,
	}
}

func collectionToProto(c catalog.Collection) *compactorv1.Collection {
	p := &compactorv1.Collection{
		Id:                    c.ID,
		Name:                  c.Name,
		Dimension:             int32(c.Dimension),
		LogPosition:           c.LogPosition,
		CompactionOffset:      c.CompactionOffset,
		Backlog:               c.Backlog(),
		SegmentVersion:        c.SegmentVersion,
		RecordCount:           c.RecordCount,
		FailureCount:          int32(c.FailureCount),
		DeadLettered:          c.DeadLettered(),
		DeadLetterTime:        ts(c.DeadLetteredAt),
		OldestUncompactedTime: ts(c.OldestUncompactedAt),
		LastCompactionTime:    ts(c.LastCompactedAt),
		CreateTime:            ts(c.CreatedAt),
		UpdateTime:            ts(c.UpdatedAt),
		Paused:                c.Paused(),
		PauseReason:           c.PauseReason,
		PausedBy:              c.PausedBy,
		PauseTime:             ts(c.PausedAt),
		MinCompactionSize:     c.Settings.MinCompactionSize,
		Distance:              distances.toProto(c.Index.Distance),
		Index:                 indexToProto(c.Index),
		Priority:              priorities.toProto(c.Policy.Priority),
		CompactionWindows:     c.Policy.Windows,
		ObjectiveMaxBacklog:   c.Policy.ObjectiveMaxBacklog,
		ThroughputShare:       c.Policy.ThroughputShare,
	}
	if c.Settings.MaxUncompactedAge > 0 {
		p.MaxUncompactedAge = durationpb.New(c.Settings.MaxUncompactedAge)
	}
	if c.Policy.ObjectiveMaxAge > 0 {
		p.ObjectiveMaxAge = durationpb.New(c.Policy.ObjectiveMaxAge)
	}
	return p
}

func recordToProto(r materialize.Record) (*compactorv1.Record, error) {
	p := &compactorv1.Record{Id: r.ID, Embedding: r.Embedding, Document: r.Document}
	if r.Metadata != nil {
		md, err := structpb.NewStruct(r.Metadata)
		if err != nil {
			return nil, fmt.Errorf("record %q: metadata: %w", r.ID, err)
		}
		p.Metadata = md
	}
	return p, nil
}

var opFromProto = map[compactorv1.Operation]materialize.Op{
	compactorv1.Operation_OPERATION_ADD:    materialize.OpAdd,
	compactorv1.Operation_OPERATION_UPDATE: materialize.OpUpdate,
	compactorv1.Operation_OPERATION_UPSERT: materialize.OpUpsert,
	compactorv1.Operation_OPERATION_DELETE: materialize.OpDelete,
}

// operationFromProto converts one pushed record; i is its index, for the
// error. Metadata values keep their JSON kinds (structs and lists included),
// so that validation names a non-scalar value precisely.
func operationFromProto(i int, p *compactorv1.OperationRecord) (materialize.OperationRecord, error) {
	op, ok := opFromProto[p.GetOp()]
	if !ok {
		return materialize.OperationRecord{}, invalidArgument(fmt.Sprintf("records[%d].op", i), "operation %s is not one of ADD, UPDATE, UPSERT, DELETE", p.GetOp())
	}
	o := materialize.OperationRecord{Op: op, ID: p.GetId(), Document: p.Document}
	if len(p.GetEmbedding()) > 0 {
		o.Embedding = p.GetEmbedding()
	}
	if md := p.GetMetadata(); md != nil && len(md.GetFields()) > 0 {
		o.Metadata = make(materialize.Metadata, len(md.GetFields()))
		for k, v := range md.GetFields() {
			if n, ok := v.GetKind().(*structpb.Value_NumberValue); ok {
				// Not AsInterface: it turns NaN and ±Inf into the strings
				// "NaN" and "Infinity", which validation would accept.
				o.Metadata[k] = n.NumberValue
				continue
			}
			o.Metadata[k] = v.AsInterface()
		}
	}
	return o, nil
}

// Page tokens are opaque to clients: base64url of "<kind>:<cursor>", where
// kind names the listing, so a token of another listing, or a forged one, is
// INVALID_ARGUMENT rather than a silently wrong page.
const (
	tokenJobs        = "jobs"
	tokenCollections = "collections"
	tokenRecords     = "records"
)

func encodeToken(kind, cursor string) string {
	if cursor == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + cursor))
}

func decodeToken(kind, tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	cursor, ok := strings.CutPrefix(string(b), kind+":")
	if err != nil || !ok || cursor == "" {
		return "", invalidArgument("page_token", "page token %q is not one of this listing; pass the next_page_token of a previous response", echo(tok))
	}
	return cursor, nil
}

// jobCursor tokens are "<created unix ms>/<job id>".
func encodeJobCursor(j catalog.Job) string {
	return encodeToken(tokenJobs, strconv.FormatInt(j.CreatedAt.UnixMilli(), 10)+"/"+j.ID)
}

func decodeJobCursor(tok string) (catalog.JobCursor, error) {
	s, err := decodeToken(tokenJobs, tok)
	if err != nil || s == "" {
		return catalog.JobCursor{}, err
	}
	ms, id, ok := strings.Cut(s, "/")
	n, perr := strconv.ParseInt(ms, 10, 64)
	if !ok || perr != nil || id == "" {
		return catalog.JobCursor{}, invalidArgument("page_token", "page token %q is malformed; pass the next_page_token of a previous response", echo(tok))
	}
	return catalog.JobCursor{CreatedAt: time.UnixMilli(n).UTC(), ID: id}, nil
}
