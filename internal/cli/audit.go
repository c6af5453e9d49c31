package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// maxAuditEvents bounds what one `compactor audit` lists (pages of the
// server's largest size).
const maxAuditEvents = 100_000

func newAuditCmd(g *globals) *cobra.Command {
	var (
		collection, since string
		from              time.Time
	)
	cmd := &cobra.Command{
		Use:   "audit [--collection COLLECTION] [--since DURATION|TIME]",
		Short: "List the audit log of operator actions (audit verify: check its hash chain)",
		Long: `List the audit log, oldest first: every operator action (compact, cancel,
pause, resume, throttle, settings, collection.create, collection.delete) with
its time, the credential that acted and its role, the address it came from,
the target, the reason, the state before and after, and the job. Needs role
operator or admin.

--collection (a name or an id; the id of a deleted collection too) keeps the
events of one collection; --since keeps those at or after a time, given as a
duration back from now (24h, 90m) or an RFC 3339 time (2026-12-01T09:00:00Z).
-o json prints an array of AuditEvent objects ("principal", "action", …).`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, func(*cobra.Command, []string) error {
			var err error
			if from, err = parseSince(since, time.Now()); err != nil {
				return fmt.Errorf("--since: %w", err)
			}
			return nil
		}, func(ctx context.Context, s *session, _ []string) error {
			collID, err := s.resolveOptionalCollection(ctx, collection)
			if err != nil {
				return err
			}
			events, err := collect(ctx, maxAuditEvents, func(ctx context.Context, size int32, token string) ([]*compactorv1.AuditEvent, string, error) {
				req := &compactorv1.ListAuditEventsRequest{CollectionId: collID, PageSize: size, PageToken: token}
				if !from.IsZero() {
					req.Since = timestamppb.New(from)
				}
				res, err := unary(ctx, s, s.c.audit.ListAuditEvents, req)
				return res.GetEvents(), res.GetNextPageToken(), err
			})
			if err != nil {
				return err
			}
			return showList(s, events, "no audit events", func() error {
				tw := s.out.table()
				fmt.Fprintln(tw, "ID\tTIME\tPRINCIPAL\tROLE\tSOURCE\tACTION\tTARGET\tJOB\tREASON\tCHANGE")
				for _, e := range events {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.GetId(), s.out.fmtTime(e.GetTime()),
						safeText(e.GetPrincipal()), safeText(e.GetRole()), orDash(safeText(e.GetSource())), safeText(e.GetAction()),
						orDash(safeText(e.GetTarget())), orDash(shortID(e.GetJobId())), orDash(safeText(ellipsize(e.GetReason(), 40))),
						orDash(safeText(ellipsize(changeText(e.GetBefore(), e.GetAfter()), 80))))
				}
				if len(events) >= maxAuditEvents {
					s.out.note("showing the first %d events; narrow with --collection or --since", maxAuditEvents)
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().StringVar(&collection, "collection", "", "only events of this collection (name or id)")
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time: a duration back from now (24h) or an RFC 3339 time")
	cmd.AddCommand(newAuditVerifyCmd(g))
	return cmd
}

func newAuditVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain; exit 1 at the first broken link",
		Long: `Ask the server to check the whole audit chain: event ids without gaps (a
deleted event leaves one), each event's previous hash equal to the hash of the
event before, each hash equal to the hash of the event's fields (an edited
field changes it), and the chain's head naming the last event (a deleted last
event). Prints the events checked and the last hash (record it elsewhere to
detect a rewrite of the whole chain); at a broken link, prints the event's id
and what differs, and exits with status 1. -o json prints the
VerifyAuditLogResponse. Needs role operator or admin.`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, nil, func(ctx context.Context, s *session, _ []string) error {
			v, err := unary(ctx, s, s.c.audit.VerifyAuditLog, &compactorv1.VerifyAuditLogRequest{})
			if err != nil {
				return err
			}
			if s.out.json {
				if err := s.out.writeProtoState(v); err != nil {
					return err
				}
			} else if v.GetOk() {
				if err := s.out.kv([][2]string{
					{"audit chain", "ok"},
					{"events checked", fmt.Sprint(v.GetEventsChecked())},
					{"last event", fmt.Sprint(v.GetLastEventId())},
					{"last hash", v.GetLastHash()},
				}); err != nil {
					return err
				}
			}
			if !v.GetOk() {
				return &ExitError{Code: 1, Err: fmt.Errorf("audit chain broken at event %d: %s", v.GetBrokenEventId(), safeText(v.GetProblem()))}
			}
			return nil
		}),
	}
}

// parseSince parses --since: "" (no bound), a positive duration back from
// now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("duration %q must be positive (how far back from now)", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h) nor an RFC 3339 time (2026-12-01T09:00:00Z)", s)
	}
	return t, nil
}

// changeText shows an audit event's before and after states.
func changeText(before, after string) string {
	switch {
	case before == "" && after == "":
		return ""
	case before == "":
		return after
	case after == "":
		return before + " -> (none)"
	}
	return before + " -> " + after
}

// shortID is an id's first 8 characters, as the other tables show jobs.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
