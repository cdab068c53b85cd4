package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/internal/text"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// GroupProtocol is the consumer group protocol a sink in group mode speaks.
type GroupProtocol string

const (
	// GroupClassic is Kafka's classic protocol (JoinGroup/SyncGroup), with
	// the cooperative-sticky assignor run by the group's leader: every
	// Kafka version since 2.4 serves it, and so does kfake.
	GroupClassic GroupProtocol = "classic"
	// GroupConsumer is KIP-848's consumer protocol: the broker's group
	// coordinator assigns the partitions (its uniform, sticky assignor)
	// and a rebalance no longer stops the whole group. Kafka 4.0+ serves
	// it (franz-go recommends 4.3+), as does kfake; against a broker that
	// does not, franz-go falls back to the classic protocol with the eager
	// sticky assignor.
	GroupConsumer GroupProtocol = "consumer"
)

// Rebalance is one change of the partitions a group member owns, as
// Config.OnRebalance reports it.
type Rebalance struct {
	// Assigned are partitions the group gave this member; each starts at
	// Positions, the ledger's next offset (or where the start policy began
	// a partition the ledger did not have).
	Assigned  []int32
	Positions map[int32]int64
	// Revoked are partitions the group moved to another member; Lost are
	// partitions this member lost with its membership (its session timed
	// out, it was fenced by a newer generation).
	Revoked, Lost []int32
	// Committed is set for a revocation whose consumed records were
	// committed before the partitions were given up (or that had none).
	// Otherwise (a loss, or a commit that did not finish within the
	// rebalance timeout) they were dropped: the next owner reads them
	// again from the ledger.
	Committed bool
}

// revokeMargin is the part of the rebalance timeout a revocation leaves for
// franz-go to rejoin the group after the callback returns.
const revokeMargin = 5 * time.Second

// groupMember is a session's membership of its consumer group: the
// partitions the coordinator assigned to it, and the lock that keeps the
// rebalance callbacks (franz-go runs them in its own goroutines) from
// running while the session's loop handles records or flushes.
type groupMember struct {
	// mu is held by the session's loop except while it waits in a poll,
	// and by each rebalance callback for its whole run.
	mu sync.Mutex
	// owned are the partitions the group assigned to this member.
	owned map[int32]bool
	// taking are partitions the group assigned (joined) that the member
	// has not taken on yet (adopt). Until it has, it is not healthy
	// (session.atEnd): a take-on may fail in every session.
	taking map[int32]bool
	// failed is what a callback met that the loop must handle: a fenced
	// commit resets the session, anything else ends it.
	failed error
	// closing is set when the session ends: callbacks fired by leaving
	// the group find nothing to commit.
	closing bool
	// doomed are the streams and files of partitions given up while a
	// flush was in flight; they are removed once no flush is (the table
	// handle is the flush's meanwhile).
	doomed      []*snapshot.Stream
	doomedFiles [][]iceberg.DataFile
	// adoptions counts the partitions taken on; each partition records
	// the count when it was (partition.adopted).
	adoptions uint64
	// assignments counts the group's assignments to this member, empty
	// ones too (joined); emptyAssigned is set when the last one was empty
	// (a standby: more members than partitions).
	assignments   uint64
	emptyAssigned bool
	// revokeWithin bounds a revocation's commit.
	revokeWithin time.Duration
	// sessionTimeout is how long the coordinator keeps a silent member
	// (groupSessionTimeout), and stopContact stops the watch of its
	// answers (watchContact).
	sessionTimeout time.Duration
	stopContact    func()
}

// fail records err for the loop, keeping the first but for a fence,
// which a later error that ends the session replaces (decisive): a failed
// take-on of assigned partitions after a fence was dropped, and the reset
// re-adopted only the partitions owned before (from a review).
func (gm *groupMember) fail(err error) {
	gm.failed = decisive(gm.failed, err)
}

// joinGroup makes the session a member of the configured group: it reads the
// table and starts the group consumer, whose coordinator assigns the
// partitions (session.assigned).
func (ss *session) joinGroup(ctx context.Context) error {
	s := ss.s
	if err := s.tbl.Refresh(ctx); err != nil {
		return err
	}
	if err := s.reconcileDeadLetters(ctx); err != nil {
		return err
	}
	ss.base = s.tbl.Iceberg()
	if err := ss.startWriter(); err != nil {
		return err
	}
	s.inLedger = nil
	// A new session owns nothing until the group assigns it partitions.
	s.stats.Owned = nil
	rebalance := s.cfg.RebalanceTimeout
	if rebalance <= 0 {
		rebalance = DefaultRebalanceTimeout
	}
	ss.gm = &groupMember{owned: map[int32]bool{}, taking: map[int32]bool{}, revokeWithin: max(rebalance-revokeMargin, rebalance/2),
		sessionTimeout: s.groupSessionTimeout(ctx)}
	// A membership answer is read within a join's deadline at the most:
	// the rebalance timeout plus the client's overhead (Dial's options may
	// set it, and the member's client has them too).
	overhead, _ := s.broker.cl.OptValue(kgo.RequestTimeoutOverhead).(time.Duration)
	contact := &groupContact{overdue: rebalance + overhead}
	opts := []kgo.Opt{
		kgo.WithHooks(contact),
		// The table in the client id: members of a group that sink
		// another table are told (checkGroupShared), and the group's
		// describe output says what each member writes.
		kgo.ClientID(s.clientID()),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.RebalanceTimeout(rebalance),
		// The group's offsets are replaced by the ledger's at every
		// assignment, before anything is fetched.
		kgo.AdjustFetchOffsetsFn(ss.assigned),
		kgo.OnPartitionsAssigned(ss.joined),
		kgo.OnPartitionsRevoked(ss.revoked),
		kgo.OnPartitionsLost(ss.lost),
	}
	if s.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(s.cfg.SessionTimeout), kgo.HeartbeatInterval(s.cfg.SessionTimeout/5))
	}
	if every := s.cfg.PartitionCheck; every > 0 {
		// A classic group learns of partitions added to the topic when
		// the client refreshes its metadata, every 5 minutes by default:
		// every PartitionCheck, as a sink of the whole topic looks.
		every = min(max(every, 10*time.Millisecond), time.Hour)
		opts = append(opts, kgo.MetadataMaxAge(every), kgo.MetadataMinAge(min(every, 5*time.Second)))
	}
	if s.cfg.GroupProtocol == GroupConsumer {
		opts = append(opts, kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	// The client joins the group at once: its callbacks, which take the
	// lock, must find the client and the offset mirror set.
	ss.gm.mu.Lock()
	defer ss.gm.mu.Unlock()
	cl, err := kgo.NewClient(s.consumerOpts(opts...)...)
	if err != nil {
		return fmt.Errorf("join consumer group %s: %w", s.cfg.Group, err)
	}
	ss.cl = cl
	s.mirror = newOffsetMirror(cl, s.cfg.Group, s.log)
	ss.gm.stopContact = s.watchContact(contact, ss.gm.sessionTimeout)
	// The session runs once the group assigns it partitions (joined
	// calls OnSession): called here, before the brokers answered, it said
	// running through a broker outage (found by an SRE).
	s.log.Info("sink session started; waiting for the group to assign partitions", "group", s.cfg.Group, "protocol", s.cfg.GroupProtocol)
	return nil
}

// assigned is the group consumer's AdjustFetchOffsetsFn: franz-go calls it
// with the partitions just assigned to this member, after fetching the
// group's committed offsets for them, and fetches from what it returns.
// Every one of them is replaced by the ledger's next offset (adopt): the
// group's offsets are written for lag tooling and never trusted.
func (ss *session) assigned(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	gm := ss.gm
	gm.mu.Lock()
	defer gm.mu.Unlock()
	topic := ss.s.cfg.Topic
	ps := slices.Sorted(maps.Keys(offsets[topic]))
	if gm.closing || len(ps) == 0 {
		return offsets, nil
	}
	if err := ss.checkGroupShared(ctx); err != nil {
		gm.fail(err)
		return nil, err
	}
	pos, err := ss.adopt(ctx, ps)
	if err != nil {
		if ctx.Err() == nil {
			// Not a rebalance cutting the assignment short: the session
			// ends, and the next one joins again.
			gm.fail(fmt.Errorf("take on partitions %v assigned by group %s: %w", ps, ss.s.cfg.Group, err))
		}
		return nil, err
	}
	out := map[int32]kgo.Offset{}
	for p, n := range pos {
		// Epoch -1: the position is the ledger's, not one this client
		// consumed, so there is no leader epoch to check it against.
		out[p] = kgo.NewOffset().At(n).WithEpoch(-1)
	}
	ss.s.rebalanced(Rebalance{Assigned: ps, Positions: pos})
	return map[string]map[int32]kgo.Offset{topic: out}, nil
}

// clientIDPrefix begins the client id of a group member, the table it
// sinks following, then "@" and the table's UUID. An older floe's member
// began "floe/" and named the table only (legacyClientIDPrefix): it read
// everything after that prefix as the table's name, so a client id that
// kept the prefix and added the UUID was another table's to it, and an
// old member stopped when an upgraded one joined (found by review: a
// rolling upgrade of a group of three); with another prefix an old
// member takes a new one for another application's, as it does any.
const (
	clientIDPrefix       = "floe:"
	legacyClientIDPrefix = "floe/"
)

// clientID is the client id of the sink's group member: its table's name
// and UUID, which tell one table from another of the same name in another
// catalog.
func (s *Sink) clientID() string {
	return clientIDPrefix + s.tbl.Name() + "@" + s.tableUUID()
}

// tableUUID is the UUID of the sink's table.
func (s *Sink) tableUUID() string { return s.tbl.Iceberg().Metadata().TableUUID().String() }

// memberTable parses the table name and UUID (empty from an older floe)
// from a member's client id; ok is false for another application's.
func memberTable(clientID string) (name, uuid string, ok bool) {
	if rest, ok := strings.CutPrefix(clientID, legacyClientIDPrefix); ok {
		return rest, "", true
	}
	rest, ok := strings.CutPrefix(clientID, clientIDPrefix)
	if !ok {
		return "", "", false
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		return rest[:i], rest[i+1:], true
	}
	return rest, "", true
}

// checkGroupShared refuses a group that a member sinking another table is
// in (checkGroupTable), once the sink's table is open and its UUID known.
func (ss *session) checkGroupShared(ctx context.Context) error {
	return ss.s.broker.checkGroupTable(ctx, ss.s.cfg.Group, ss.s.tbl.Name(), ss.s.tableUUID())
}

// checkGroupTable refuses group when a member of it sinks another table
// than table (told by its client id): a group divides its topic's
// partitions among all its members, so each table would get part of the
// topic, and each audit, seeing the rest as lag, would say complete
// (found by review). Another table is another name or, when uuid is
// given, the same name with another UUID: the table of that name in
// another catalog (a host whose --catalog was left at its default: from a
// new user's run). Without uuid (Pipelines.Check, before anything is
// created: a refused member created its table first and left it behind,
// empty, a new user's report) names alone are compared, as a table of
// the same name may be the one another member of this group has just
// created in this catalog. Other applications' members, and a floe's
// before client ids named the table, are not told apart; a group that
// cannot be described is left to the group's own errors.
func (b *Broker) checkGroupTable(ctx context.Context, group, table, uuid string) error {
	described, err := b.adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil
	}
	for _, m := range described[group].Members {
		other, otherUUID, ok := memberTable(m.ClientID)
		switch {
		case !ok:
		case other != table:
			return &CheckError{Settings: []Setting{SettingGroup}, Err: fmt.Errorf("consumer group %s has a member that sinks table %s (on %s), and this one sinks %s: a group divides its topics' partitions among all its members, so each table would get only part of them; give each table a --group of its own",
				group, other, m.ClientHost, table)}
		case uuid != "" && otherUUID != "" && otherUUID != uuid:
			return &CheckError{Settings: []Setting{SettingGroup}, Err: fmt.Errorf("consumer group %s has a member that sinks a table %s (on %s) other than this one's (table UUID %s, this one's %s): the same name in another catalog, or a table dropped and created again under this name while a member of the dropped one runs; a group divides its topics' partitions among all its members, so each table would get only part of them; give every member the same --catalog, or stop the members of a dropped table",
				group, other, m.ClientHost, otherUUID, uuid)}
		}
	}
	return nil
}

// joined is the group consumer's OnPartitionsAssigned, which franz-go
// calls at every assignment, an empty one too (assigned takes the
// partitions on): the member is in the group again and runs.
func (ss *session) joined(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	gm := ss.gm
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if gm.closing {
		return
	}
	gm.assignments++
	gm.emptyAssigned = len(assigned[ss.s.cfg.Topic]) == 0
	for _, p := range assigned[ss.s.cfg.Topic] {
		gm.taking[p] = true
	}
	if ss.s.cfg.OnSession != nil {
		ss.s.cfg.OnSession()
	}
}

// revoked is the group consumer's OnPartitionsRevoked: the group moves
// these partitions to another member. What was consumed of them is
// committed first, within the rebalance timeout (release).
func (ss *session) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ss.giveUp(ctx, revoked[ss.s.cfg.Topic], true)
}

// lost is the group consumer's OnPartitionsLost: this member's membership
// ended (its session timed out while it was paused or cut off, or a newer
// generation fenced it), and its partitions may already be another
// member's. What it consumed of them is dropped; a flush already in flight
// commits only if the ledger still ends where it starts.
func (ss *session) lost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	ss.giveUp(ctx, lost[ss.s.cfg.Topic], false)
}

func (ss *session) giveUp(ctx context.Context, ps []int32, commit bool) {
	if len(ps) == 0 {
		return
	}
	gm := ss.gm
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if gm.closing {
		return
	}
	slices.Sort(ps)
	for _, p := range ps {
		delete(gm.taking, p)
	}
	committed := ss.release(ctx, ps, commit)
	r := Rebalance{Committed: committed}
	if commit {
		r.Revoked = ps
	} else {
		r.Lost = ps
	}
	ss.s.rebalanced(r)
}

// release gives partitions ps up. With commit (a revocation), everything
// consumed is flushed first (the kept partitions' records too: one commit
// instead of two) and committed within the rebalance timeout, less a
// margin to rejoin; it reports whether that commit made it. Otherwise, or
// when the commit fails or does not finish in time, what was consumed of
// ps is dropped and the next owner reads it again from the ledger. A
// commit still running then goes on: the ledger check admits it only if
// the next owner has not committed those partitions first, and fences
// whichever of the two comes second.
func (ss *session) release(ctx context.Context, ps []int32, commit bool) bool {
	// A revocation with nothing consumed of its partitions, and no commit
	// in flight that may hold some, drops nothing.
	dirty := func(p int32) bool { return ss.parts[p] != nil && ss.parts[p].dirty() }
	committed := commit
	if commit && (ss.inflight != nil || slices.ContainsFunc(ps, dirty)) {
		committed = false
		deadline := time.Now().Add(ss.gm.revokeWithin)
		done, err := ss.waitUntil(deadline)
		if done && err == nil && slices.ContainsFunc(ps, dirty) {
			// The flush's first file may wait for its columns
			// (Sink.reserveSchema), which a slow catalog holds up too.
			done, err = ss.reserveUntil(ctx, deadline)
			if done && err == nil {
				err = ss.flush(ctx)
				if err == nil {
					done, err = ss.waitUntil(deadline)
				}
			}
		}
		switch {
		case !done:
			ss.s.log.Warn("the commit of revoked partitions did not finish within the rebalance timeout; giving them up, the next owner reads them again from the ledger",
				"partitions", text.Ranges(slices.Sorted(slices.Values(ps))), "within", ss.gm.revokeWithin)
		case err != nil:
			// A fence resets the session (the loop does it); anything
			// else ends it. A commit whose dead letters are pending is
			// in (the successor adds them): the revocation is committed
			// unless records of ps came after it (an earlier flush failed
			// so, and the newer ones were never flushed). So is one whose
			// ledger check then found main moved back (errLedgerBack).
			ss.gm.fail(err)
			_, pending := errors.AsType[*snapshot.DeadLettersPendingError](err)
			committed = (pending || err == errLedgerBack) && !slices.ContainsFunc(ps, dirty)
		default:
			committed = true
		}
	}
	for _, p := range ps {
		ss.drop(ctx, p)
		delete(ss.gm.owned, p)
	}
	ss.ownedChanged()
	ss.s.inLedger = slices.DeleteFunc(ss.s.inLedger, func(tp mapping.TopicPartition) bool { return slices.Contains(ps, tp.Partition) })
	return committed
}

// waitUntil waits for the flush in flight until deadline. done is false
// when it is still running.
func (ss *session) waitUntil(deadline time.Time) (done bool, err error) {
	run := ss.inflight
	if run == nil {
		return true, nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-run.done:
		ss.inflight = nil
		return true, run.err
	case <-t.C:
		return false, nil
	}
}

// drop forgets what the session consumed of partition p: its rows, its
// open stream and its closed files (removed now, or once the flush in
// flight is done with the table handle).
func (ss *session) drop(ctx context.Context, p int32) {
	if ss.laned[p] {
		// Its rows share the spill lane with what the other laned
		// partitions spilled: the lane goes, and they are read again.
		ss.gm.doomed = append(ss.gm.doomed, ss.spill.st)
		ss.spill, ss.laned, ss.spillLost = nil, nil, true
		ss.gm.fail(errSpillLost)
	}
	if st := ss.streams[p]; st != nil {
		ss.gm.doomed = append(ss.gm.doomed, st)
		delete(ss.streams, p)
	}
	if fs := ss.files[p]; len(fs) > 0 {
		ss.gm.doomedFiles = append(ss.gm.doomedFiles, fs)
		delete(ss.files, p)
	}
	if pt := ss.parts[p]; pt != nil {
		ss.held -= pt.held
		pt.release()
		delete(ss.parts, p)
	}
	if ss.inflight == nil {
		ss.removeDoomed(ctx)
	}
}

// removeDoomed removes the streams and files of partitions given up, once
// no flush is in flight.
func (ss *session) removeDoomed(ctx context.Context) {
	gm := ss.gm
	if gm == nil || ss.inflight != nil {
		return
	}
	for _, st := range gm.doomed {
		st.Abort(ctx, ss.s.log)
	}
	for _, fs := range gm.doomedFiles {
		ss.s.tbl.RemoveFiles(ctx, ss.s.log, fs)
	}
	gm.doomed, gm.doomedFiles = nil, nil
}

// adopt takes partitions ps on and returns where each starts: the ledger's
// next offset, or where the start policy begins a partition the ledger
// does not have (committed first, as a session's start does). It reloads
// the table first, after the flush in flight (whose handle it is): every
// assignment starts from the ledger as it is now, so records another
// member committed while this one did not own a partition are never read
// twice.
func (ss *session) adopt(ctx context.Context, ps []int32) (map[int32]int64, error) {
	s := ss.s
	if err := ss.wait(); err != nil {
		// The flush in flight failed (fenced, most likely): the loop
		// handles it; the partitions are taken on from the ledger anyway.
		ss.gm.fail(err)
	}
	ss.removeDoomed(ctx)
	// The member that had these partitions may have stopped between a
	// commit and adding its dead letters, and no session may start again:
	// taking them on reconciles the dead-letter tables, as a start does.
	if err := s.reconcileDeadLetters(ctx); err != nil {
		return nil, err
	}
	// Two members that begin a topic at once both commit the starts of
	// all its partitions; the second is fenced and reads the first's.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if err := s.tbl.Refresh(ctx); err != nil {
			return nil, err
		}
		st, err := s.readStart(ctx)
		if err != nil {
			return nil, err
		}
		parts := map[int32]*partition{}
		fail := func(err error) (map[int32]int64, error) {
			for _, pt := range parts {
				pt.release()
			}
			return nil, err
		}
		var starts []mapping.Range
		for p := range st.wm {
			if !slices.Contains(ps, p) {
				starts = append(starts, st.startElsewhere(s, p)...)
			}
		}
		for _, p := range ps {
			if _, ok := st.wm[p]; !ok {
				return fail(fmt.Errorf("partition %d of %s was assigned, but the brokers do not list it", p, s.cfg.Topic))
			}
			pt, start, err := ss.newPart(ctx, st, p)
			starts = append(starts, start...)
			if err != nil {
				return fail(err)
			}
			parts[p] = pt
		}
		if len(starts) > 0 {
			err := s.commitStarts(ctx, starts)
			if errors.Is(err, snapshot.ErrFenced) && attempt < attempts {
				for _, pt := range parts {
					pt.release()
				}
				continue
			}
			if err != nil {
				return fail(err)
			}
		}
		pos := map[int32]int64{}
		for p, pt := range parts {
			ss.gm.adoptions++
			pt.adopted = ss.gm.adoptions
			ss.parts[p] = pt
			ss.gm.owned[p] = true
			delete(ss.gm.taking, p)
			s.inLedger = append(s.inLedger, pt.tp)
			pos[p] = pt.next
			if pt.dirty() && ss.deadline.IsZero() {
				// A loss recorded at the start is committed on time even
				// when no record follows.
				ss.deadline = time.Now().Add(s.cfg.FlushInterval)
			}
		}
		if ss.writer == nil {
			ss.base = s.tbl.Iceberg()
		}
		ss.ownedChanged()
		s.log.Info("partitions assigned by the group; each starts at the ledger's next offset", "group", s.cfg.Group,
			"partitions", text.Ranges(slices.Sorted(maps.Keys(pos))), "positions", positionsText(pos))
		return pos, nil
	}
}

// ownedChanged reports the partitions the member owns now (Stats.Owned,
// Config.OnOwned): the metrics, status page and summary say which are this
// member's, as the log alone did (found by an operator). The caller holds
// gm.mu.
func (ss *session) ownedChanged() {
	owned := slices.Sorted(maps.Keys(ss.gm.owned))
	ss.s.stats.Owned = owned
	if f := ss.s.cfg.OnOwned; f != nil {
		f(owned)
	}
}

// reset drops everything the session consumed and takes the partitions
// the group assigned to it on again from the ledger: another writer
// committed one of them since this member read the ledger (this member
// lost it while it was paused, cut off or slow), so the records it holds
// are that writer's now. The member stays in the group and keeps its
// other partitions: only their uncommitted records are read again.
func (ss *session) reset(ctx context.Context) error {
	gm := ss.gm
	owned := slices.Sorted(maps.Keys(gm.owned))
	if ss.spill != nil {
		gm.doomed = append(gm.doomed, ss.spill.st)
	}
	ss.spill, ss.laned, ss.spillLost = nil, nil, false
	for _, p := range slices.Collect(maps.Keys(ss.parts)) {
		ss.drop(ctx, p)
	}
	ss.held = 0
	ss.writer = nil
	ss.pending, ss.pendingBytes, ss.deadline = 0, 0, time.Time{}
	s := ss.s
	s.inLedger = nil
	gm.owned = map[int32]bool{}
	if len(owned) == 0 {
		return nil
	}
	pos, err := ss.adopt(ctx, owned)
	if err != nil {
		return fmt.Errorf("take partitions %v on again from the ledger after a fence: %w", owned, err)
	}
	seek := map[int32]kgo.EpochOffset{}
	for p, n := range pos {
		seek[p] = kgo.EpochOffset{Epoch: -1, Offset: n}
	}
	// Seeking drops what the client buffered for these partitions.
	ss.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: seek})
	return nil
}

// survive handles err, which a commit or a rebalance callback ended with.
// In group mode a fence resets the session and the member goes on with
// the partitions it owns, unless it came after the member's own failed
// commit attempts for Config.RetryFor (Sink.failedFence): that ends the
// session, and Sink.run gives up. Any other error (and a fence outside
// group mode) ends the session.
func (ss *session) survive(ctx context.Context, err error) error {
	if err == nil || ss.gm == nil || !errors.Is(err, snapshot.ErrFenced) {
		return err
	}
	fe, ok := errors.AsType[*snapshot.FencedError](err)
	switch {
	case ok && fe.Failed == nil:
		ss.s.failing = failureRun{}
	case ok && ss.s.failedFence(fe):
		return err
	}
	if !errors.Is(err, errSpillLost) {
		ss.s.fenced(err)
	}
	return ss.reset(ctx)
}

// fenced counts a fence and reports it.
func (s *Sink) fenced(err error) {
	s.stats.Fenced++
	if s.cfg.OnFenced != nil {
		s.cfg.OnFenced(err)
	}
	if s.cfg.Group == "" {
		// Outside a group, a fence most often means a second sink of the
		// same partitions (started twice): each fences the other flush
		// after flush, and the warning named no way out (from a new-user
		// run).
		s.log.Warn("fenced by another writer of the same partitions; dropping what was consumed, re-reading the ledger and re-seeking: nothing is lost or doubled, but two sinks of one topic and table redo each other's work; run one, or several with --group (or with disjoint --partitions)", "err", err)
		return
	}
	s.log.Warn("fenced by another writer; dropping what was consumed, re-reading the ledger and re-seeking", "err", err)
}

// rebalanced counts a change of partitions and reports it.
func (s *Sink) rebalanced(r Rebalance) {
	s.stats.Rebalances++
	if s.cfg.OnRebalance != nil {
		s.cfg.OnRebalance(r)
	}
	if len(r.Revoked) > 0 || len(r.Lost) > 0 {
		s.log.Info("partitions given up", "group", s.cfg.Group, "revoked", text.Ranges(slices.Sorted(slices.Values(r.Revoked))),
			"lost", text.Ranges(slices.Sorted(slices.Values(r.Lost))), "committed", r.Committed)
	}
}

// maxLoggedPositions is how many partitions' offsets an assignment's log
// line lists; above it, their lowest and highest (250 partitions made a
// line of 3 KB).
const maxLoggedPositions = 8

// positionsText is an assignment's next offsets for its log line:
// map[P:OFFSET ...], or on a wide topic the lowest and highest.
func positionsText(pos map[int32]int64) string {
	if len(pos) <= maxLoggedPositions {
		return fmt.Sprint(pos)
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, o := range pos {
		lo, hi = min(lo, o), max(hi, o)
	}
	return fmt.Sprintf("%d to %d (floe status lists each partition)", lo, hi)
}

// offsetMirror writes the ledger's progress into the consumer group's
// committed offsets, for lag tooling (kafka-consumer-groups, Burrow,
// exporters), with the snapshot that committed it as each offset's
// metadata. It commits from a goroutine of its own, newest offsets only:
// franz-go holds a group commit while a rebalance is joining, and the
// rebalance may be waiting for this member's callbacks, which wait for its
// flush; a flush that waited for the group commit would never finish.
type offsetMirror struct {
	cl    *kgo.Client
	group string
	log   *slog.Logger

	mu       sync.Mutex
	pending  map[string]map[int32]kgo.EpochOffset
	snapshot int64
	wake     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	// ctx bounds the commits; close cancels it once mirrorTimeout has
	// passed, not before, so that the commit in flight when the sink stops
	// still lands.
	ctx    context.Context
	cancel context.CancelFunc
}

// mirrorTimeout bounds one group commit.
const mirrorTimeout = 15 * time.Second

func newOffsetMirror(cl *kgo.Client, group string, log *slog.Logger) *offsetMirror {
	ctx, cancel := context.WithCancel(context.Background())
	m := &offsetMirror{cl: cl, group: group, log: log, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel}
	go m.run()
	return m
}

// add queues the next offsets of commit c.
func (m *offsetMirror) add(c mapping.Commit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending = map[string]map[int32]kgo.EpochOffset{}
	}
	for _, r := range c.Ranges {
		ps := m.pending[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			m.pending[r.Topic] = ps
		}
		if o, ok := ps[r.Partition]; !ok || r.High > o.Offset {
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.High}
		}
	}
	m.snapshot = c.SnapshotID
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *offsetMirror) run() {
	defer close(m.done)
	for {
		select {
		case <-m.quit:
			return
		case <-m.wake:
			m.commit()
		}
	}
}

// commit commits what is queued. A failure costs a warning: resuming never
// reads the group's offsets.
func (m *offsetMirror) commit() {
	m.mu.Lock()
	offs, snap := m.pending, m.snapshot
	m.pending = nil
	m.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	meta := "floe:snapshot=" + strconv.FormatInt(snap, 10)
	cctx, cancel := context.WithTimeout(m.ctx, mirrorTimeout)
	defer cancel()
	cctx = kgo.PreCommitFnContext(cctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[j].Metadata = &meta
			}
		}
		return nil
	})
	m.cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err == nil {
			err = offsetCommitError(resp)
		}
		if err != nil {
			m.log.Warn("could not write committed offsets into the consumer group (lag tooling only: resuming never reads them)", "group", m.group, "err", err)
		}
	})
}

// close lets the commit in flight finish, commits what is still queued,
// and stops the goroutine, all within mirrorTimeout; the client closes
// after. Cancelling the commit in flight instead would drop its offsets:
// the group would end one flush behind the ledger.
func (m *offsetMirror) close() {
	close(m.quit)
	deadline := time.AfterFunc(mirrorTimeout, m.cancel)
	defer deadline.Stop()
	defer m.cancel()
	<-m.done
	m.commit()
}

// offsetCommitError is the first partition error of an offset commit.
func offsetCommitError(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// brokersUnreachable reports whether err, which ended a member's group
// session, is the brokers not answering (connFailed) rather than the
// group's answer. franz-go passes on the net error it met; its own for a
// dead connection are unexported and retried before a session ends.
func brokersUnreachable(err error) bool {
	if _, tlsOrSASL := errors.AsType[*kgo.ErrFirstReadEOF](err); tlsOrSASL {
		return false // the brokers answered, and closed: security explains it
	}
	return connFailed(err)
}

// unreachableMessage says what happens to a group member that cannot reach
// the brokers: kept is whether it still holds its partitions (the consumer
// protocol keeps them while franz-go retries; the classic one gives them
// up and rejoins), session the group's session timeout.
func unreachableMessage(kept bool, session time.Duration) string {
	next := "it gave up its partitions and rejoins the group once they answer"
	if kept {
		next = "it keeps its partitions and retries until they answer"
	}
	return fmt.Sprintf("the brokers cannot be reached from this consumer-group member (the group has not dropped it): %s; if they stay unreachable past the session timeout (%s), the group gives its partitions to another member", next, session)
}

// groupRefused returns the error to stop with when the group coordinator
// refused this member for a reason that rejoining does not change (franz-go
// rejoins after every group error, for ever): a session timeout outside
// the brokers' range, a group another application uses with another
// protocol, a full group. Nil for the others, which a rejoin may get past.
func groupRefused(err error, group string, session time.Duration) error {
	switch {
	case errors.Is(err, kerr.InvalidSessionTimeout):
		return &CheckError{Settings: []Setting{SettingSessionTimeout}, Err: fmt.Errorf("consumer group %s: the brokers refuse a session timeout of %s: it must lie within their group.min.session.timeout.ms and group.max.session.timeout.ms (6s and 30m by default): %w", group, session, err)}
	case errors.Is(err, kerr.InconsistentGroupProtocol):
		return &CheckError{Settings: []Setting{SettingGroup}, Err: fmt.Errorf("consumer group %s has members that assign partitions another way (another application, or floe with another --group-protocol): give floe a group of its own: %w", group, err)}
	case errors.Is(err, kerr.GroupMaxSizeReached):
		return &CheckError{Settings: []Setting{SettingGroup}, Err: fmt.Errorf("consumer group %s is full (the brokers' group.max.size): run fewer members, or raise it: %w", group, err)}
	}
	return nil
}
