package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

func newVersionsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "versions COLLECTION",
		Short: "The version history of a collection",
		Long: `List the segment versions of a collection (its id or its name), newest first:
the current one, the versions kept by the server's --versions-to-keep (which
get --version and query --version read, and rollback --to-version restores),
and retired versions GC has not collected yet.

The table shows each version's number, when it was committed, the log offsets
it covers, its records, size and blocks, the job that wrote it (or the
rollback that made it, with its reason and who asked), its state (current,
kept or retired), its record digest, and the outcome of its last
verification (verified, failed or unknown: never verified; compactor verify). -o json prints the ListVersionsResponse: {"versions": [SegmentVersion,
...], "current_version", "oldest_kept_version"}.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, nil, onCollection(func(ctx context.Context, s *session, id string) error {
			res, err := unary(ctx, s, s.c.collection.ListVersions, &compactorv1.ListVersionsRequest{CollectionId: id})
			if err != nil {
				return err
			}
			return s.printVersions(res)
		})),
	}
}

// versionState is "current", "kept" or "retired".
func versionState(v *compactorv1.SegmentVersion) string {
	switch {
	case v.GetCurrent():
		return "current"
	case v.GetKept():
		return "kept"
	}
	return "retired"
}

// versionOffsets is "(start, end]", or "..end]" when the start is unknown.
func versionOffsets(v *compactorv1.SegmentVersion) string {
	if v.GetOffsetStart() < 0 {
		return fmt.Sprintf("..%d]", v.GetCompactionOffset())
	}
	return fmt.Sprintf("(%d, %d]", v.GetOffsetStart(), v.GetCompactionOffset())
}

// versionOrigin says what wrote the version: its job, or the rollback.
func versionOrigin(v *compactorv1.SegmentVersion) string {
	if v.GetRollbackOf() > 0 {
		s := fmt.Sprintf("rollback to %d", v.GetRollbackOf())
		if v.GetCreatedBy() != "" {
			s += " by " + v.GetCreatedBy()
		}
		if v.GetReason() != "" {
			s += ": " + v.GetReason()
		}
		return safeText(ellipsize(s, 72))
	}
	if id := v.GetJobId(); id != "" {
		return "job " + id[:min(8, len(id))]
	}
	return "-"
}

// verificationName is a verification without its enum prefix, lower case;
// "unknown" when none is recorded.
func verificationName(v compactorv1.VersionVerification) string {
	if v == compactorv1.VersionVerification_VERSION_VERIFICATION_UNSPECIFIED {
		return "unknown"
	}
	return strings.ToLower(strings.TrimPrefix(v.String(), "VERSION_VERIFICATION_"))
}

func (s *session) printVersions(res *compactorv1.ListVersionsResponse) error {
	return s.show(res, func() error {
		if len(res.GetVersions()) == 0 {
			s.out.note("no versions: the collection has not been compacted yet")
			return nil
		}
		tw := s.out.table()
		fmt.Fprintln(tw, "VERSION\tCREATED\tOFFSETS\tRECORDS\tSIZE\tBLOCKS\tSTATE\tDIGEST\tVERIFIED\tWRITTEN BY")
		for _, v := range res.GetVersions() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", v.GetVersion(), s.out.fmtTime(v.GetCreateTime()), versionOffsets(v),
				v.GetRecordCount(), format.Bytes(v.GetSegmentBytes()), v.GetBlockCount(), versionState(v),
				orDash(ellipsize(v.GetDigest(), 12)), verificationName(v.GetVerification()), versionOrigin(v))
		}
		return tw.Flush()
	})
}

func newRollbackCmd(g *globals) *cobra.Command {
	var (
		toVersion        int64
		reason, operator string
		yes              bool
	)
	cmd := &cobra.Command{
		Use:   "rollback COLLECTION --to-version N [--reason TEXT] [--operator WHO] [--yes]",
		Short: "Make a kept version current again, keeping every later write",
		Long: `Roll a collection (its id or its name) back to kept version N (compactor
versions lists them): a new version becomes current whose segment is version
N's and whose compaction offset is N's. Every operation record pushed after N
is then backlog again: reads apply it as the log tail, and the next compaction
re-compacts it. The compactions after N are undone; no write is lost.

The rollback does not queue that compaction: the scheduler does, or compact
it yourself. To keep the collection at version N (while a bad compaction's
cause is found), pause it first (compactor pause COLLECTION).

It is refused while a job of the collection runs (cancel it or wait), and for
a version the collection no longer keeps. It asks for confirmation on stdin
unless --yes is given. --reason and --operator are kept in the version
history. Needs role admin (the server's --tokens-file). -o json prints the
RollbackCollectionResponse.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("to-version") {
				return errors.New("--to-version is required")
			}
			if toVersion < 1 {
				return fmt.Errorf("--to-version must be at least 1, got %d", toVersion)
			}
			return nil
		}, onCollection(func(ctx context.Context, s *session, id string) error {
			if !yes {
				c, err := s.collection(ctx, id)
				if err != nil {
					return err
				}
				if err := s.confirm(fmt.Sprintf("Roll collection %s back from version %d to version %d? The log after version %d is compacted again. [y/N] ",
					safeText(c.GetName()), c.GetSegmentVersion(), toVersion, toVersion)); err != nil {
					return err
				}
			}
			m, err := unary(ctx, s, s.c.collection.RollbackCollection, &compactorv1.RollbackCollectionRequest{
				CollectionId: id, ToVersion: toVersion, Reason: reason, Operator: operator})
			if err != nil {
				return err
			}
			return s.show(m, func() error {
				c := m.GetCollection()
				_, err := fmt.Fprintf(s.out.w, "rolled back collection %s (%s): version %d is version %d's segment (replaces version %d); compaction offset %d, backlog %s to compact again\n",
					safeText(c.GetName()), c.GetId(), m.GetVersion().GetVersion(), m.GetVersion().GetRollbackOf(), m.GetReplacedVersion(),
					c.GetCompactionOffset(), plural(c.GetBacklog(), "record"))
				return err
			})
		})),
	}
	f := cmd.Flags()
	f.Int64Var(&toVersion, "to-version", 0, "the kept version to make current again (required)")
	f.StringVar(&reason, "reason", "", "why, kept in the version history")
	f.StringVar(&operator, "operator", defaultOperator(), "who rolls back, kept in the version history")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	for _, name := range []string{"to-version", "reason", "operator"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return cmd
}

// confirm asks question on stderr and reads one line of stdin: "y" or
// "yes" (any case) goes on; anything else, or the end of stdin, is an
// error saying nothing was done.
func (s *session) confirm(question string) error {
	fmt.Fprint(s.out.errw, question)
	in := s.g.streams.In
	if in == nil {
		in = strings.NewReader("")
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	switch answer := strings.ToLower(strings.TrimSpace(line)); {
	case answer == "y" || answer == "yes":
		return nil
	case err != nil && answer == "":
		fmt.Fprintln(s.out.errw)
		return errors.New("not confirmed (stdin ended): nothing was done; pass --yes to skip the question")
	}
	return errors.New("not confirmed: nothing was done")
}
