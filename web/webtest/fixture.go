package webtest

import (
	"time"

	"github.com/compactorhq/compactor/web"
)

// Fixed ids of the fixture.
const (
	Orders  = "11111111-1111-4111-8111-111111111111" // busy collection, one job running, one queued
	Hostile = "22222222-2222-4222-8222-222222222222" // named <script>alert(1)</script>, dead-lettered
	Debian  = "33333333-3333-4333-8333-333333333333" // no backlog
	Users   = "44444444-4444-4444-8444-444444444444" // small backlog, a one-off running

	RunningJob     = "a0000001-0000-4000-8000-000000000000" // Orders, writing blocks (2 of 6) after 72 s, 44.9%, ETA 2m24s
	RunningUnknown = "a0000002-0000-4000-8000-000000000000" // Users, reading the log, ETA unknown
	QueuedHostile  = "a0000003-0000-4000-8000-000000000000" // Hostile, one-off, hostile reason
	QueuedOrders   = "a0000004-0000-4000-8000-000000000000" // Orders, scheduled follow-up
	Succeeded      = "a0000005-0000-4000-8000-000000000000" // Orders, 1m12s
	Failed         = "a0000006-0000-4000-8000-000000000000" // Hostile, failed 2 h ago
	Cancelled      = "a0000007-0000-4000-8000-000000000000" // Debian, cancelled one-off
	Nothing        = "a0000008-0000-4000-8000-000000000000" // Debian, nothing to compact
	OldFailure     = "a0000009-0000-4000-8000-000000000000" // Hostile, failed 2 days ago
	OlderSuccess   = "a0000010-0000-4000-8000-000000000000" // Orders, 3 h ago
	Rollback       = "a0000011-0000-4000-8000-000000000000" // Orders' rollback to version 10 (a version's job only)

	HostileName   = "<script>alert(1)</script>"
	HostileReason = "He said \"stop\"\nthen <b>left</b> & 'went' <img src=x onerror=alert(2)>"
	HostileError  = "write block 0007: blob store: \"connection reset\" <script>alert(3)</script>\n\tat segment.Write"
)

// Now is the fixture's clock: 2026-11-30 12:00:00 UTC.
var Now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Fixture returns a Source with four collections (one hostile and
// dead-lettered), two running jobs, two queued and six finished, and a
// backlog history for Orders, and two nodes (node-a serving, node-b gone),
// all relative to Now.
func Fixture() *Source {
	now := Now
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	collections := []web.Collection{
		{
			ID: Orders, Name: "orders", Dimension: 64, Backlog: 1200, RecordCount: 50000, SegmentVersion: 12,
			LogPosition: 61200, CompactionOffset: 60000, OldestUncompactedAt: ago(3 * time.Minute),
			LastCompactedAt: ago(5 * time.Minute), CreatedAt: ago(30 * 24 * time.Hour),
			SegmentBytes: 8650752, BlockCount: 13, VersionsKept: 3,
			Index: web.CollectionIndex{Distance: "cosine", M: 16, EfConstruction: 200, EfSearch: 100, Built: true,
				Vectors: 50000, Tombstones: 1250, Bytes: 15400000, Build: "incremental", BuiltAt: ago(5 * time.Minute), BuildSeconds: 0.84},
			// Version 12 rolled back to 10, undoing 11; 9 retired.
			Versions: []web.CollectionVersion{
				{Version: 12, CreatedAt: ago(5 * time.Minute), OffsetStart: 60500, CompactionOffset: 60000, RecordCount: 50000, SegmentBytes: 8650752, BlockCount: 13,
					Current: true, Kept: true, RollbackOf: 10, Reason: "version 11 dropped records", CreatedBy: "alice@ops", JobID: Rollback},
				{Version: 11, CreatedAt: ago(time.Hour), OffsetStart: 60000, CompactionOffset: 60500, JobID: Succeeded, RecordCount: 49000, SegmentBytes: 8400000, BlockCount: 13,
					Kept: true, Digest: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Verification: "verified"},
				{Version: 10, CreatedAt: ago(3 * time.Hour), OffsetStart: 59000, CompactionOffset: 60000, JobID: OlderSuccess, RecordCount: 50000, SegmentBytes: 8650752, BlockCount: 13, Kept: true},
				{Version: 9, CreatedAt: ago(6 * time.Hour), OffsetStart: -1, CompactionOffset: 59000, RecordCount: 49500, SegmentBytes: 8500000, BlockCount: 13},
			},
		},
		{
			ID: Hostile, Name: HostileName, Dimension: 8, Backlog: 300, RecordCount: 10, SegmentVersion: 2,
			LogPosition: 310, CompactionOffset: 10, FailureCount: 5, DeadLettered: true,
			DeadLetteredAt: ago(2 * time.Hour), OldestUncompactedAt: ago(3 * time.Hour),
			LastCompactedAt: ago(48 * time.Hour), CreatedAt: ago(10 * 24 * time.Hour),
			Index: web.CollectionIndex{Disabled: true, Distance: "l2", M: 16, EfConstruction: 200, EfSearch: 100},
			Versions: []web.CollectionVersion{
				{Version: 2, CreatedAt: ago(48 * time.Hour), OffsetStart: 20, CompactionOffset: 10, RecordCount: 10, Current: true, Kept: true,
					RollbackOf: 1, Reason: HostileReason, CreatedBy: HostileName},
				{Version: 1, CreatedAt: ago(50 * time.Hour), OffsetStart: 0, CompactionOffset: 10, JobID: Failed, RecordCount: 10, Kept: true, Digest: HostileName},
			},
		},
		{
			ID: Debian, Name: "debian-packages", Dimension: 64, RecordCount: 123456, SegmentVersion: 40,
			LogPosition: 200000, CompactionOffset: 200000, LastCompactedAt: ago(time.Hour),
			CreatedAt: ago(20 * 24 * time.Hour),
		},
		{
			ID: Users, Name: "users", Dimension: 16, Backlog: 45, RecordCount: 900, SegmentVersion: 3,
			LogPosition: 945, CompactionOffset: 900, OldestUncompactedAt: ago(40 * time.Second),
			LastCompactedAt: ago(10 * time.Minute), CreatedAt: ago(5 * 24 * time.Hour),
		},
	}
	jobs := []web.Job{
		{
			ID: RunningJob, CollectionID: Orders, CollectionName: "orders", Trigger: web.TriggerScheduled,
			State: web.StateRunning, Reason: "backlog 1200 >= 10", Node: "node-a", Attempt: 1,
			CreatedAt: ago(80 * time.Second), StartedAt: ago(72 * time.Second),
			OffsetStart: 60000, OffsetEnd: 61200, RecordsRead: 1200, RecordsTotal: 1200, VersionBefore: 12,
			Phase: "writing blocks", Fraction: 0.4499, ETA: 144 * time.Second, ETAKnown: true, BlocksWritten: 2, BlocksTotal: 6,
		},
		{
			ID: RunningUnknown, CollectionID: Users, Trigger: web.TriggerOneOff, State: web.StateRunning,
			Reason: "operator", Node: "node-b", Attempt: 1, CreatedAt: ago(6 * time.Second),
			StartedAt: ago(5 * time.Second), RecordsRead: 10, Phase: "reading log", Fraction: 0.0001,
		},
		{
			ID: QueuedHostile, CollectionID: Hostile, CollectionName: HostileName, Trigger: web.TriggerOneOff,
			State: web.StateQueued, Reason: HostileReason, Attempt: 1, CreatedAt: ago(30 * time.Second),
		},
		{
			ID: QueuedOrders, CollectionID: Orders, Trigger: web.TriggerScheduled, State: web.StateQueued,
			Reason: "follow-up: records arrived during job a0000001", Attempt: 1, CreatedAt: ago(60 * time.Second),
		},
		{
			ID: Succeeded, CollectionID: Orders, CollectionName: "orders", Trigger: web.TriggerScheduled,
			State: web.StateSucceeded, Reason: "backlog 5000 >= 10", Node: "node-a", Attempt: 1,
			CreatedAt: ago(20 * time.Minute), StartedAt: ago(20*time.Minute - 2*time.Second),
			FinishedAt: ago(20*time.Minute - 74*time.Second), OffsetStart: 55000, OffsetEnd: 60000,
			RecordsRead: 5000, RecordsTotal: 5000, RecordsWritten: 4980, BytesWritten: 1572864,
			VersionBefore: 11, VersionAfter: 12,
		},
		{
			ID: Failed, CollectionID: Hostile, CollectionName: HostileName, Trigger: web.TriggerScheduled,
			State: web.StateFailed, Reason: "oldest record older than 5m0s", Node: "node-b", Attempt: 5,
			Error: HostileError, CreatedAt: ago(2*time.Hour + 5*time.Minute),
			StartedAt: ago(2*time.Hour + 4*time.Minute), FinishedAt: ago(2*time.Hour + 4*time.Minute - 3400*time.Millisecond),
			OffsetStart: 10, OffsetEnd: 310, RecordsRead: 120, RecordsTotal: 300, VersionBefore: 2,
		},
		{
			ID: Cancelled, CollectionID: Debian, CollectionName: "debian-packages", Kind: web.KindIndexRebuild, Trigger: web.TriggerOneOff,
			State: web.StateCancelled, Reason: "test", Note: "cancelled by operator", Node: "node-a", Attempt: 1,
			CreatedAt: ago(50 * time.Minute), StartedAt: ago(49 * time.Minute), FinishedAt: ago(48 * time.Minute),
			RecordsRead: 700, RecordsTotal: 2000, VersionBefore: 39,
		},
		{
			ID: Nothing, CollectionID: Debian, CollectionName: "debian-packages", Trigger: web.TriggerScheduled,
			State: web.StateSucceeded, Reason: "oldest record older than 5m0s", Note: "nothing to compact",
			Node: "node-a", Attempt: 1, CreatedAt: ago(61 * time.Minute), StartedAt: ago(61 * time.Minute),
			FinishedAt: ago(61*time.Minute - 850*time.Millisecond), VersionBefore: 40, VersionAfter: 40,
		},
		{
			ID: OldFailure, CollectionID: Hostile, CollectionName: HostileName, Trigger: web.TriggerScheduled,
			State: web.StateFailed, Reason: "backlog 300 >= 10", Node: "node-a", Attempt: 1, Error: "materialize: disk full",
			CreatedAt: ago(49 * time.Hour), StartedAt: ago(49 * time.Hour), FinishedAt: ago(49*time.Hour - 10*time.Second),
		},
		{
			ID: OlderSuccess, CollectionID: Orders, CollectionName: "orders", Trigger: web.TriggerScheduled,
			State: web.StateSucceeded, Reason: "backlog 800 >= 10", Node: "node-b", Attempt: 1,
			CreatedAt: ago(3 * time.Hour), StartedAt: ago(3 * time.Hour), FinishedAt: ago(3*time.Hour - 25*time.Second),
			OffsetStart: 54200, OffsetEnd: 55000, RecordsRead: 800, RecordsTotal: 800, RecordsWritten: 800,
			BytesWritten: 204800, VersionBefore: 10, VersionAfter: 11,
		},
	}
	s := New(jobs, collections)
	s.SetNodes([]web.Node{
		{Name: "node-a", Address: "10.0.0.1:7070", Version: "v1.4.0", StartedAt: ago(2 * time.Hour), HeartbeatAt: ago(2 * time.Second), Alive: true, Self: true},
		{Name: "node-b", Address: "10.0.0.2:7070", Version: "v1.4.0", StartedAt: ago(5 * time.Hour), HeartbeatAt: ago(40 * time.Minute)},
	})
	s.SetPlan([]web.PlanEntry{
		{CollectionID: Orders, CollectionName: "orders", Decision: "run", Reason: "backlog of 1200 records (minimum 10)", Backlog: 1200},
		{CollectionID: Hostile, CollectionName: HostileName, Decision: "dead-lettered", Reason: "dead-lettered after 5 consecutive failures", Backlog: 345},
	})
	var pts []web.Point
	for i, v := range []float64{0, 150, 420, 800, 760, 200, 90, 300, 650, 980, 1100, 1200} {
		pts = append(pts, web.Point{At: ago(time.Duration(55-5*i) * time.Minute), Value: v})
	}
	s.SetBacklogHistory(Orders, pts)
	return s
}
