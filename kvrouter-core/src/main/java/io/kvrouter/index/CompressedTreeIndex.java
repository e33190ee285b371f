package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.ints.Int2LongOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.jspecify.annotations.NullUnmarked;

/**
 * The compressed block tree: one node per run of blocks that the same workers hold, with per-worker
 * cutoffs for workers that hold only a prefix of a run; behind {@link KvIndexes#compressedTree()}
 * and {@link KvIndexes#concurrentCompressedTree()}, and with a bound ({@link RunBound}) behind
 * their {@code maxBlocks} forms.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: RunNodes under a root whose run is empty; each node's RunState holds the run's local
 * hashes in a long[] (8 bytes a block), its sequence hashes only where they depart from DESIGN.md
 * §2 (RunSeqs: otherwise the run's head hash and §2 give them), its holders as sorted ids with a
 * cut each (how many leading blocks of the run the worker holds), and its children. A block is
 * (node, offset). Per worker rank a RunWorker names its blocks (RunNames: 8 bytes a slot, a
 * fingerprint and (node id, offset), every match checked against the block's hash).
 *
 * Invariants (writer-side, after every event):
 *  - A worker holds a prefix of every run it is in (cut), so a run is split where a worker's
 *    blocks would stop being a prefix: a store that diverges inside a run (the tail moves to a
 *    new child, the new blocks are another child), a store into a run below a block the worker
 *    does not hold, a removal of a block that is not the worker's last in the run.
 *  - Holders are prefix-closed as in BlockIndex: an id >= 0 (connected) in a node's holders
 *    holds the whole path above it; a worker that misses a block above is there as ~id
 *    (detached), which readers skip. Holes are made and filled as in BlockIndex (leaf first,
 *    root first), with the same version steps of at most STEP_CHANGES changes.
 *  - Merge: a node that is not the root, with exactly one child whose every holder holds the
 *    node's whole run, is merged with that child (runs of at most MAX_RUN blocks). Every event
 *    ends by pruning the nodes it left unheld and childless and merging around every node it
 *    changed (settle), so no two nodes could be one: a node ends a run only where a worker's cut
 *    ends, where the tree branches, or at MAX_RUN. The node count is therefore bounded by the
 *    live set, not by its history (CompressedTreeChurnTest churns prefixes and checks it).
 *  - Trim: settle also cuts the tail of a childless run that no holder reaches (left by removals
 *    and evictions) once it is at least half the run, into new arrays (a reader of the old state
 *    keeps its blocks), so a run's arrays follow what is held.
 *  - Bound (maxBlocks, RunBound): every node made enters its clock queue and every node pruned
 *    or merged away leaves its count; readers mark used bits only when bounded (a final field);
 *    a store marks the runs it used that existed (at its end, markStoreUsed); each event ends,
 *    after it settled, with evictToFit, whose drops (dropTail: a worker's tail of a run) are
 *    settled as they go. runBlocks counts the runs' blocks (held or not) for it.
 *  - A store below the end of a childless run that its worker holds whole appends to the run
 *    (extend: in place when the arrays have room, RunState notes) rather than making a child
 *    that settle would merge back at once.
 *  - A split keeps the head in the node (its key in the parent's children does not change) and
 *    moves the tail to a new node; a merge appends the child's run to the node. Either moves
 *    blocks: the writer repoints the names (RunNames.repoint, RunWorker refs) of every holder of
 *    the moved blocks, and the store's cursor (the position of the block before the next one).
 *  - Removed fast path (vLLM's one Removed per evicted block, most events of a trace): a block
 *    that is the worker's last of its cut in its run, when the entry is detached or the run does
 *    not end there with a child holding the worker connected, only lowers the cut. remove()
 *    batches such blocks of one node (deepest first) into one publishCut: one new state with a
 *    copied cuts array (RunState.withCut; a shared one when one worker holds the run), nothing
 *    else allocated. A cut that stays above 0
 *    changes no node's holder set, so no prune or merge can follow from it and the node is not
 *    settled; a childless run is trimmed on the spot (trimTail). Only a dropped entry (cut 0)
 *    goes to touched. Everything else (an alias, a block inside the cut: split; the last block of
 *    a run whose child holds the worker: detach below) takes release(), the general path.
 *    A Removed that lists a chain from the top (each block the parent of the next, as one Removed
 *    per eviction names a leaf's blocks) is taken deepest first (chainFrom), so it takes the fast
 *    path too instead of splitting the run once per block. Each block is looked up once (chainFrom
 *    notes the name slots it found, the removal goes by them) and the worker's name table shrinks
 *    at most once per event, at its end.
 *  - Names of a store's new blocks go in as a batch: RunNames.reserve makes room for the run at
 *    once, so the puts that follow never rebuild the table, and RunNames.touch loads their home
 *    slots together first (a Removed of several blocks too). A block the store itself appended or
 *    made has the store's hash as its canonical one, so naming it checks nothing (segmentFrom's
 *    known).
 *  - A Stored of one block below the end of a childless run its worker holds whole (vLLM's one
 *    event per block) appends the block and raises the cut in one state (extendHeld), unless its
 *    hash already names a block of the worker (then extend and hold, the general path).
 *
 * Writers: under writeLock when concurrent, on the caller's thread otherwise; applyAll applies a
 * ThreadPoolIndexer lane's batch under one hold of the lock (the lanes hand it over per batch,
 * not per event; readers take no lock, so they never notice). The writer owns every
 * node's parent and dead fields, every RunWorker, the worker table and the counters.
 * Readers: findMatches takes no lock. It walks states (acquire loads) from the root by the query's
 * local hashes, compares the query with each run, and intersects the workers still alive with
 * each node's holders; a worker ends in a node at the smaller of its cut and the matched length.
 * A split or merge is one publication of the node's new state, made after any new node is
 * complete, so a reader sees the run before or after it. A reader that read a state before a
 * merge may go on to the merged child's last state: that state is valid for its blocks and older
 * than what the reader reads below, as in TreeIndex a walk reads each node at a later instant than
 * its parent. The version check and the waiting-readers pause are SteppedIndex's, shared with
 * BlockIndex.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class CompressedTreeIndex extends SteppedIndex {
  private static final VarHandle BY_ID;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      BY_ID = l.findVarHandle(CompressedTreeIndex.class, "byId", RunWorker[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** The longest run of one node (RunNames keeps offsets in 11 bits). */
  static final int MAX_RUN = 2048;

  static final int STEP_CHANGES = SteppedIndex.STEP_CHANGES;
  private static final long[] NO_HASHES = new long[0];

  final RunNode root =
      new RunNode(0L, null, new RunState(NO_HASHES, NO_HASHES, RunState.NONE, RunState.NONE, null));
  final IndexCounters counters = new IndexCounters();

  /** The blocks' hashes where §2 does not give them, and the node ids (RunSeqs). Writer-only. */
  final RunSeqs runSeqs = new RunSeqs();

  @SuppressWarnings("unused") // through BY_ID
  private RunWorker[] byId = new RunWorker[8];

  private final Object2IntOpenHashMap<Worker> workerIds = new Object2IntOpenHashMap<>();
  private int nextId;

  // writer scratch
  private final ArrayList<RunNode> touched = new ArrayList<>();
  private final ArrayList<RunNode> childScratch = new ArrayList<>();
  private final ArrayList<RunNode> storeUsed = new ArrayList<>(); // bounded: runs a store used
  private final ArrayList<RunNode> made = new ArrayList<>(); // new runs of this event (fresh)
  private final RunWorker.Ref cursor = new RunWorker.Ref(null, 0);
  // remove's scratch: the name slot chainFrom found for each block of a chain, NOT_NAMED for a
  // block it did not find, UNNOTED where the removal must look the block up itself
  private static final int UNNOTED = -1;
  private static final int NOT_NAMED = -2;
  private static final int MAX_NOTED = 4096;
  private int[] chainSlots = new int[16];
  private RunNode foundNode;
  private int foundOff;
  private int foundSlot;
  // RunNames.touch: batches of at least TOUCH_MIN names load their home slots first
  private static final int TOUCH_MIN = 4;

  /** The CLOCK bound (RunBound); null when unbounded. */
  final RunBound bound;

  /** The blocks of every run in the tree (held or not), kept by the writer. */
  long runBlocks;

  /** Set by dropTail: the worker's entry was connected and lost its whole cut (for RunBound). */
  boolean lastDropEmptiedConnected;

  /** Tests only: sees each node before the writer settles it (null otherwise). */
  Consumer<RunNode> settleFault;

  CompressedTreeIndex(boolean concurrent) {
    this(concurrent, Long.MAX_VALUE);
  }

  /** A tree that holds at most {@code maxBlocks} (worker, block) pairs (RunBound notes). */
  CompressedTreeIndex(boolean concurrent, long maxBlocks) {
    super(concurrent ? new ReentrantLock() : null);
    if (maxBlocks < 1)
      throw new IllegalArgumentException("maxBlocks must be >= 1, got " + maxBlocks);
    this.bound = maxBlocks == Long.MAX_VALUE ? null : new RunBound(this, counters, maxBlocks);
    workerIds.defaultReturnValue(-1);
  }

  boolean isConcurrent() {
    return writeLock != null;
  }

  // ------------------------------------------------------------------ reads

  /** How many leading blocks of {@code run} equal the query's from {@code depth}. */
  private static int match(long[] run, int len, long[] q, int depth) {
    final int n = Math.min(len, q.length - depth);
    int j = 0;
    while (j < n && run[j] == q[depth + j]) j++;
    return j;
  }

  /**
   * Keeps in {@code ids[0..alive)} the workers that hold the whole run of {@code s} connected when
   * the query matched all {@code m} blocks of it; each other gets its final score {@code depth +
   * min(cut, m)} behind the alive range. Returns the new alive count.
   */
  private static int step(int[] ids, int[] scores, int alive, RunState s, int m, int depth) {
    final int[] h = s.ids;
    final int[] cuts = s.cuts;
    final int len = s.len;
    int i = 0;
    while (i < alive) {
      final int id = ids[i];
      final int p = Arrays.binarySearch(h, id);
      final int c = p >= 0 ? cuts[p] : 0;
      if (c == len && m == len) {
        i++;
      } else {
        alive--;
        ids[i] = ids[alive];
        ids[alive] = id;
        scores[alive] = depth + Math.min(c, m);
      }
    }
    return alive;
  }

  /**
   * Marks the deepest matched node of the workers in {@code scores[alive..before)} that dropped out
   * at {@code next}: {@code next} itself, or {@code prev} for those that hold none of its run
   * (their score is the depth before it).
   */
  private static void markDropped(
      RunNode prev, RunNode next, int[] scores, int alive, int before, int depth) {
    boolean inNext = false;
    boolean inPrev = false;
    for (int i = alive; i < before; i++) {
      if (scores[i] == depth) inPrev = true;
      else inNext = true;
    }
    if (inNext) next.markUsed();
    if (inPrev) prev.markUsed();
  }

  @Override
  OverlapScores walk(long[] q, boolean earlyExit) {
    final int len = q.length;
    if (len == 0) return Scores.EMPTY;
    RunNode node = RunNode.child(root.state().children, q[0]);
    if (node == null) return Scores.EMPTY;
    RunState s = node.state();
    final int[] first = s.ids;
    final int from = RunState.connectedFrom(first);
    final int cnt = first.length - from;
    if (cnt == 0) return Scores.EMPTY;
    final int[] ids = Arrays.copyOfRange(first, from, first.length);
    final int[] scores = new int[cnt];
    // a bounded tree marks each worker's deepest matched node (RunBound notes): where workers
    // drop out (the node before, for one that holds none of the run), and where the walk ends
    final boolean mark = bound != null;
    int m = match(s.locals, s.len, q, 0);
    int alive = step(ids, scores, cnt, s, m, 0);
    if (mark && alive < cnt) node.markUsed();
    int depth = m;
    while (alive > 0 && depth < len && !(earlyExit && alive == 1)) {
      final RunNode next = RunNode.child(s.children, q[depth]);
      if (next == null) break;
      s = next.state();
      m = match(s.locals, s.len, q, depth);
      final int before = alive;
      alive = step(ids, scores, alive, s, m, depth);
      if (mark && alive < before) markDropped(node, next, scores, alive, before, depth);
      node = next;
      depth += m;
    }
    if (mark && alive > 0) node.markUsed();
    for (int i = 0; i < alive; i++) scores[i] = depth;
    final RunWorker[] states = (RunWorker[]) BY_ID.getAcquire(this);
    final int[] counts = new int[cnt];
    for (int i = 0; i < cnt; i++) counts[i] = states[ids[i]].heldBlocks;
    return new Scores(states, ids, scores, counts, cnt);
  }

  // ------------------------------------------------------------------ steps

  /** After a holders change inside a step, where the state is valid. */
  private void changedInStep() {
    countStepChange();
  }

  // ------------------------------------------------------------------ workers

  private RunWorker intern(Worker worker) {
    int id = workerIds.getInt(worker);
    RunWorker[] table = (RunWorker[]) BY_ID.get(this);
    if (id >= 0) return table[id];
    id = nextId++;
    if (id == table.length) table = Arrays.copyOf(table, table.length * 2);
    RunWorker ws = new RunWorker(worker, id, runSeqs);
    table[id] = ws;
    BY_ID.setRelease(this, table);
    workerIds.put(worker, id);
    counters.inc(IndexCounters.WORKERS);
    return ws;
  }

  private RunWorker findWorker(Worker worker) {
    int id = workerIds.getInt(worker);
    return id < 0 ? null : ((RunWorker[]) BY_ID.get(this))[id];
  }

  private RunWorker byId(int id) {
    return ((RunWorker[]) BY_ID.get(this))[id < 0 ? ~id : id];
  }

  /** The worker of a signed id (connected or detached). Writer-only. */
  RunWorker workerById(int signedId) {
    return byId(signedId);
  }

  private List<RunWorker> live() {
    RunWorker[] table = (RunWorker[]) BY_ID.get(this);
    List<RunWorker> out = new ArrayList<>();
    for (int i = 0; i < nextId; i++) {
      if (!table[i].forgotten) out.add(table[i]);
    }
    return out;
  }

  private List<RunWorker> ranksOf(long workerId) {
    List<RunWorker> out = new ArrayList<>();
    for (RunWorker ws : live()) {
      if (ws.worker.workerId() == workerId) out.add(ws);
    }
    return out;
  }

  // ------------------------------------------------------------------ names

  /** Finds the block {@code ws} names {@code seq} into foundNode/foundOff/foundSlot. */
  private boolean lookup(RunWorker ws, long seq) {
    final int i = ws.names.find(seq);
    if (i >= 0) {
      foundSlot = i;
      foundNode = ws.names.nodeAt(i);
      foundOff = ws.names.offAt(i);
      return true;
    }
    foundSlot = i; // negative: where an insert of seq would go (RunNames.putAt)
    if (ws.others != null) {
      RunWorker.Ref r = ws.others.get(seq);
      if (r != null) {
        foundNode = r.node;
        foundOff = r.off;
        return true;
      }
    }
    return false;
  }

  /** Drops the name {@code seq} found by the last lookup. */
  private void unname(RunWorker ws, long seq) {
    if (foundSlot >= 0) ws.names.removeAt(foundSlot);
    else ws.others.remove(seq);
  }

  /** Names block (x, off) by {@code seq}; right after a lookup of seq that found nothing. */
  private void name(RunWorker ws, long seq, RunNode x, int off) {
    if (runSeqs.seqAt(x, off) == seq) {
      ws.names.putAt(foundSlot, seq, x, off);
    } else {
      if (ws.others == null) ws.others = new Long2ObjectOpenHashMap<>();
      ws.others.put(seq, new RunWorker.Ref(x, off));
    }
  }

  private static void addAlias(RunWorker ws, RunNode x, int off) {
    if (ws.aliases == null) ws.aliases = new ArrayList<>();
    for (RunWorker.Ref r : ws.aliases) {
      if (r.node == x && r.off == off) {
        r.extra++;
        return;
      }
    }
    RunWorker.Ref r = new RunWorker.Ref(x, off);
    r.extra = 1;
    ws.aliases.add(r);
  }

  private static boolean removeAlias(RunWorker ws, RunNode x, int off) {
    if (ws.aliases == null) return false;
    for (int i = 0; i < ws.aliases.size(); i++) {
      RunWorker.Ref r = ws.aliases.get(i);
      if (r.node == x && r.off == off) {
        if (--r.extra == 0) ws.aliases.remove(i);
        return true;
      }
    }
    return false;
  }

  /** Moves {@code ws}'s refs to blocks of {@code from} at offsets >= {@code fromOff}. */
  private static void moveRefs(RunWorker ws, RunNode from, int fromOff, RunNode to, int delta) {
    if (ws.others != null) {
      for (RunWorker.Ref r : ws.others.values()) moveRef(r, from, fromOff, to, delta);
    }
    if (ws.aliases != null) {
      for (RunWorker.Ref r : ws.aliases) moveRef(r, from, fromOff, to, delta);
    }
  }

  private static void moveRef(RunWorker.Ref r, RunNode from, int fromOff, RunNode to, int delta) {
    if (r.node == from && r.off >= fromOff) {
      r.node = to;
      r.off += delta;
    }
  }

  // ------------------------------------------------------------------ structure

  private void addChild(RunNode p, RunNode c) {
    final RunState ps = p.plain();
    final Object ch = ps.children;
    if (ch == null) {
      p.publish(ps.withChildren(c));
    } else if (ch instanceof RunNode only) {
      p.publish(ps.withChildren(RunChildren.of(only, c)));
    } else {
      RunChildren t = (RunChildren) ch;
      RunChildren grown = t.put(c);
      if (grown != t) p.publish(ps.withChildren(grown));
    }
  }

  private void removeChild(RunNode p, RunNode c) {
    final RunState ps = p.plain();
    final Object ch = ps.children;
    if (ch == c) {
      p.publish(ps.withChildren(null));
    } else if (ch instanceof RunChildren t && t.remove(c)) {
      if (t.size() == 1) p.publish(ps.withChildren(t.only()));
      else if (t.isEmpty()) p.publish(ps.withChildren(null));
    } else {
      throw new IllegalStateException("not a child");
    }
  }

  /** A new childless, unheld node under {@code p} with blocks {@code i..} of a store. */
  private RunNode newRun(RunNode p, long[] seqs, long[] locals, int i) {
    final int n = Math.min(seqs.length - i, MAX_RUN);
    final long[] l = Arrays.copyOfRange(locals, i, i + n);
    // the hashes are kept only when they depart from §2 (RunSeqs)
    final long[] s =
        RunSeqs.chained(seqs, locals, i, n) ? null : Arrays.copyOfRange(seqs, i, i + n);
    final RunNode c = new RunNode(l[0], p, new RunState(l, s, RunState.NONE, RunState.NONE, null));
    c.head = seqs[i];
    if (s == null) RunSeqs.setMarks(c, 0, n, seqs, i);
    c.linked =
        p != root && seqs[i] == RunSeqs.next(runSeqs.seqAt(p, p.plain().length() - 1), locals[i]);
    runSeqs.register(c);
    runBlocks += n;
    addChild(p, c);
    touched.add(c);
    born(c);
    c.fresh = true; // new blocks: the store does not count them as used (RunNode notes)
    made.add(c);
    return c;
  }

  /**
   * Whether new blocks below the end of {@code x}'s run may go into the run itself: {@code x} has
   * no children and {@code ws} holds all of it, so a new child holding them would be merged into it
   * at the end of the event anyway.
   */
  private boolean canExtend(RunWorker ws, RunNode x, RunState st) {
    if (x == root || st.children != null || st.length() >= MAX_RUN) return false;
    final int e = st.entry(ws.id);
    return e >= 0 && st.cuts[e] == st.length();
  }

  /**
   * Appends blocks {@code i..} of a store (as many as fit in MAX_RUN), unheld, to the run of {@code
   * x} (publishAppended).
   */
  private RunNode extend(RunNode x, long[] seqs, long[] locals, int i) {
    final RunState st = x.plain();
    final int n = Math.min(seqs.length - i, MAX_RUN - st.length());
    publishAppended(x, st, st.cuts, seqs, locals, i, n);
    touched.add(x);
    return x;
  }

  /**
   * Publishes {@code x}'s run {@code st} with blocks {@code i..i+n-1} of a store appended and the
   * given cuts: in place when its arrays have room (RunState notes), else in arrays grown by half
   * (up to MAX_RUN); every hash kept when one of the new blocks departs from §2, else the new
   * blocks' checkpoints set and their hashes learnt. The one growth rule of extend and extendHeld.
   */
  private void publishAppended(
      RunNode x, RunState st, int[] cuts, long[] seqs, long[] locals, int i, int n) {
    final int len = st.length();
    long[] l = st.locals;
    long[] s = st.seqs;
    final int cap = Math.min(MAX_RUN, Math.max(len + n, len + (len >>> 1) + 1));
    if (s == null
        && (seqs[i] != RunSeqs.next(runSeqs.seqAt(x, len - 1), locals[i])
            || !RunSeqs.chained(seqs, locals, i, n))) {
      s = runSeqs.all(x, Math.max(l.length, cap)); // a departing block: keep every hash
      x.marks = null; // seqs give every hash now
    }
    if (len + n > l.length) l = Arrays.copyOf(l, cap);
    if (s != null && len + n > s.length) s = Arrays.copyOf(s, cap);
    System.arraycopy(locals, i, l, len, n);
    if (s != null) System.arraycopy(seqs, i, s, len, n);
    runBlocks += n;
    x.publish(new RunState(l, s, st.ids, cuts, null, len + n));
    if (s == null) {
      RunSeqs.setMarks(x, len, len + n, seqs, i);
      for (int j = 0; j < n; j++) runSeqs.learn(x, len + j, seqs[i + j]);
    }
  }

  /**
   * A store's last block ({@code i}) appended to the run of {@code x} and held by {@code ws} in one
   * new state (what extend then hold would publish as two): vLLM's one Stored per block, below the
   * worker's own leaf. Returns false, having changed nothing but the table's room, when the block's
   * hash already names a block of the worker (the general path releases that one first). Leaves the
   * cursor on the new block. The caller checked canExtend.
   */
  private boolean extendHeld(
      RunWorker ws, RunNode x, RunState st, long[] seqs, long[] locals, int i) {
    final long seq = seqs[i];
    ws.names.reserve(1);
    if (lookup(ws, seq)) return false;
    final int slot = foundSlot; // where the name goes: nothing below changes the table
    final int len = st.length();
    final int e = st.entry(ws.id); // canExtend: the worker holds the whole run
    final int[] cuts;
    if (st.cuts.length == 1) {
      cuts = RunState.singleCut(len + 1);
    } else {
      cuts = st.cuts.clone();
      cuts[e] = len + 1;
    }
    publishAppended(x, st, cuts, seqs, locals, i, 1);
    ws.names.putAt(slot, seq, x, len);
    ws.heldBlocks++;
    counters.add(IndexCounters.BLOCKS_INDEXED, 1);
    if (st.ids[e] < 0) ws.detachedCount++;
    touched.add(x);
    if (bound != null && !x.fresh) storeUsed.add(x);
    cursor.node = x;
    cursor.off = len;
    return true;
  }

  /** Splits {@code n}'s run before offset {@code k} (0 < k < length); returns the new tail. */
  private RunNode split(RunNode n, int k) {
    final RunState st = n.plain();
    final int len = st.length();
    final long[] tl = Arrays.copyOfRange(st.locals, k, len);
    final long[] ts = st.seqs == null ? null : Arrays.copyOfRange(st.seqs, k, len);
    final long tailHead = runSeqs.seqAt(n, k);
    int tn = 0;
    for (int c : st.cuts) if (c > k) tn++;
    final int[] tIds = new int[tn];
    final int[] tCuts = new int[tn];
    final int[] hCuts = new int[st.cuts.length];
    int t = 0;
    for (int i = 0; i < st.ids.length; i++) {
      final int c = st.cuts[i];
      hCuts[i] = Math.min(c, k);
      if (c > k) {
        tIds[t] = st.ids[i];
        tCuts[t++] = c - k;
      }
    }
    final RunNode tail =
        new RunNode(
            tl[0],
            n,
            new RunState(tl, ts, tn == 1 ? RunState.single(tIds[0]) : tIds, tCuts, st.children));
    tail.head = tailHead;
    tail.linked = st.seqs == null || st.seqs[k] == RunSeqs.next(st.seqs[k - 1], st.locals[k]);
    if (ts == null) runSeqs.foldMarks(n, k, tail, 0, len - k); // before n's run is cut
    runSeqs.register(tail);
    childScratch.clear();
    RunNode.addChildren(st.children, childScratch);
    for (RunNode c : childScratch) c.parent = tail;
    childScratch.clear();
    for (int i = 0; i < tn; i++) {
      final RunWorker ws = byId(tIds[i]);
      for (int j = k; j < k + tCuts[i]; j++) {
        ws.names.repoint(runSeqs.seqAt(n, j), n, j, tail, j - k);
      }
      if (ws.hasRefs()) moveRefs(ws, n, k, tail, -k);
    }
    if (cursor.node == n && cursor.off >= k) {
      cursor.node = tail;
      cursor.off -= k;
    }
    n.publish(
        new RunState(
            Arrays.copyOf(st.locals, k),
            st.seqs == null ? null : Arrays.copyOf(st.seqs, k),
            st.ids,
            hCuts,
            tail));
    runSeqs.shortened(n, k);
    touched.add(n);
    touched.add(tail);
    born(tail);
    if (n.isUsed()) tail.markUsed(); // its blocks were as recently used as the head's
    return tail;
  }

  /** Whether {@code c}, the only child, can be appended to the run of {@code n}. */
  private static boolean mergeable(RunState ns, RunState cs) {
    final int ln = ns.length();
    if (ln + cs.length() > MAX_RUN) return false;
    for (int i = 0; i < cs.ids.length; i++) {
      final int p = Arrays.binarySearch(ns.ids, cs.ids[i]);
      if (p < 0 || ns.cuts[p] != ln) return false;
    }
    return true;
  }

  /** Appends the run of {@code c}, the only child of {@code n}, to {@code n}'s. */
  private void merge(RunNode n, RunNode c) {
    final RunState ns = n.plain();
    final RunState cs = c.plain();
    final int ln = ns.length();
    final int lc = cs.length();
    final long[] l = Arrays.copyOf(ns.locals, ln + lc);
    System.arraycopy(cs.locals, 0, l, ln, lc);
    // the merged run keeps no hashes when neither did and the child's head is §2's (RunSeqs)
    long[] s = null;
    if (ns.seqs != null || cs.seqs != null || !c.linked) {
      s = runSeqs.all(n, ln + lc);
      System.arraycopy(runSeqs.all(c, lc), 0, s, ln, lc);
      n.marks = null; // seqs give every hash now
    } else {
      runSeqs.foldMarks(c, 0, n, ln, lc); // the child's checkpoints, at their new offsets
    }
    final int[] cuts = ns.cuts.clone();
    for (int i = 0; i < cs.ids.length; i++) {
      final int p = Arrays.binarySearch(ns.ids, cs.ids[i]);
      cuts[p] = ln + cs.cuts[i];
      final RunWorker ws = byId(cs.ids[i]);
      for (int j = 0; j < cs.cuts[i]; j++) {
        ws.names.repoint(runSeqs.seqAt(c, j), c, j, n, ln + j);
      }
      if (ws.hasRefs()) moveRefs(ws, c, 0, n, ln);
    }
    childScratch.clear();
    RunNode.addChildren(cs.children, childScratch);
    for (RunNode g : childScratch) g.parent = n;
    childScratch.clear();
    if (cursor.node == c) {
      cursor.node = n;
      cursor.off += ln;
    }
    n.publish(new RunState(l, s, ns.ids, cuts, cs.children));
    if (c.isUsed()) n.markUsed();
    died(c);
  }

  /** A node was made and linked: a bounded tree queues it. */
  private void born(RunNode c) {
    if (bound != null) bound.nodeCreated(c);
  }

  /** A node left the tree. */
  private void died(RunNode c) {
    c.dead = true;
    runSeqs.release(c);
    if (bound != null) bound.nodeDied();
  }

  /** Prunes and merges around every node the event changed. */
  private void settleTouched() {
    try {
      for (int k = 0; k < touched.size(); k++) {
        if (settleFault != null) settleFault.accept(touched.get(k));
        settle(touched.get(k));
      }
    } finally {
      touched.clear(); // a failed settle leaves no stale node for the next event to settle
    }
    if (bound != null) bound.settled();
  }

  /** Settles what an eviction visit changed (RunBound). */
  void settleAfterEviction() {
    settleTouched();
  }

  private void settle(RunNode x) {
    while (x != root && !x.dead) {
      final RunState st = x.plain();
      if (st.ids.length == 0 && st.children == null) {
        final RunNode p = x.parent;
        removeChild(p, x);
        runBlocks -= st.length();
        died(x);
        x = p;
        continue;
      }
      if (st.children == null) trimTail(x, st);
      mergeDown(x);
      // a merge may have taken in an unheld, childless child that was still to be pruned (the
      // touched list is in no particular order): then x is one too
      final RunState ms = x.plain();
      if (ms.ids.length == 0 && ms.children == null) continue;
      if (x.parent != root) mergeDown(x.parent);
      return;
    }
  }

  /**
   * Cuts off the blocks at the end of a childless run that no one holds (removals and evictions
   * leave them) once they are at least half the run, so the run's arrays follow what is held; a new
   * state with copied arrays, so a reader of the old state still sees its blocks.
   */
  private void trimTail(RunNode x, RunState st) {
    int held = 0;
    for (int c : st.cuts) held = Math.max(held, c);
    final int len = st.length();
    if (held * 2 > len) return;
    runBlocks -= len - held;
    x.publish(
        new RunState(
            Arrays.copyOf(st.locals, held),
            st.seqs == null ? null : Arrays.copyOf(st.seqs, held),
            st.ids,
            st.cuts,
            null));
    runSeqs.shortened(x, held);
  }

  private void mergeDown(RunNode n) {
    while (!n.dead && n != root) {
      final RunState st = n.plain();
      if (!(st.children instanceof RunNode c)) return;
      if (!mergeable(st, c.plain())) return;
      merge(n, c);
    }
  }

  // ------------------------------------------------------------------ writes

  @Override
  void applyLocked(RouterEvent event) {
    CacheEvent data = event.data();
    try {
      if (data instanceof CacheEvent.Stored s) {
        store(intern(event.worker()), s);
      } else if (data instanceof CacheEvent.Removed r) {
        remove(findWorker(event.worker()), r);
      } else {
        clear(intern(event.worker()));
        counters.inc(IndexCounters.CLEARED_EVENTS);
      }
    } finally {
      cursor.node = null;
      storeUsed.clear();
      settleTouched();
    }
    try {
      if (bound != null && bound.over()) bound.evictToFit();
    } finally {
      for (int k = 0; k < made.size(); k++) made.get(k).fresh = false;
      made.clear();
    }
  }

  private void store(RunWorker ws, CacheEvent.Stored s) {
    if (s.hasParent()) {
      if (!lookup(ws, s.parentHash())) {
        counters.inc(IndexCounters.PARENT_MISSING);
        return;
      }
      cursor.node = foundNode;
      cursor.off = foundOff;
      if (bound != null) storeUsed.add(foundNode); // the chain hangs from it: used
    } else {
      cursor.node = root;
      cursor.off = -1;
    }
    final long[] seqs = s.blockHashes();
    final long[] locals = s.tokensHashes();
    final int n = seqs.length;
    int i = 0;
    while (i < n) {
      final RunNode x = cursor.node;
      final int off = cursor.off;
      final RunState st = x.plain();
      final RunNode at;
      final int from;
      final int known; // blocks of at from here on are this store's new ones (segmentFrom)
      if (off + 1 < st.length()) {
        if (st.locals[off + 1] == locals[i]) {
          at = x;
          from = off + 1;
          known = Integer.MAX_VALUE;
        } else {
          split(x, off + 1);
          at = newRun(x, seqs, locals, i);
          from = 0;
          known = 0;
        }
      } else {
        final RunNode c = RunNode.child(st.children, locals[i]);
        if (c == null && canExtend(ws, x, st)) {
          // what newRun and the merge at the end of the event would make, without copying
          if (i == n - 1 && extendHeld(ws, x, st, seqs, locals, i)) {
            i++;
            continue;
          }
          from = st.length();
          at = extend(x, seqs, locals, i);
          known = from;
        } else {
          at = c != null ? c : newRun(x, seqs, locals, i);
          from = 0;
          known = c != null ? Integer.MAX_VALUE : 0;
        }
      }
      i = segment(ws, at, from, seqs, locals, i, known);
    }
    markStoreUsed();
    counters.inc(IndexCounters.STORED_EVENTS);
  }

  /**
   * Stores blocks {@code i..} of a chain along the run of {@code x} from offset {@code from} (whose
   * first block matches), as far as the run and the chain agree; leaves the cursor on the last
   * block stored and returns the index of the next chain block to store.
   */
  private int segment(
      RunWorker ws, RunNode x, int from, long[] seqs, long[] locals, int i, int known) {
    RunState st = x.plain();
    final int len = st.length();
    final int n = seqs.length;
    int end = from + 1;
    while (end < len && i + (end - from) < n && st.locals[end] == locals[i + end - from]) end++;
    final int e = st.entry(ws.id);
    final int c = e >= 0 ? st.cuts[e] : 0;
    if (c < from) {
      // the worker does not hold the block before: its blocks go to a run of their own, whose
      // offset 0 is chain block i
      return segmentFrom(ws, split(x, from), 0, end - from, seqs, i, Integer.MAX_VALUE);
    }
    return segmentFrom(ws, x, from, end, seqs, i, known);
  }

  /**
   * Blocks {@code [known, ..)} of {@code x} are new blocks of this store (newRun, extend): their
   * canonical hash is the store's own, so naming them needs no check against the run (RunSeqs).
   */
  private int segmentFrom(
      RunWorker ws, RunNode x, int from, int end, long[] seqs, int i, int known) {
    if (bound != null && !x.fresh) storeUsed.add(x); // a run that existed, stored again or extended
    int pend = from;
    // Blocks the worker holds already, stored again under their own hashes (a shared prefix):
    // when the worker has no other names, a held block's only name is its own hash, so the
    // name is known to be there without a lookup.
    if (ws.others == null || ws.others.isEmpty()) {
      final RunState st = x.plain();
      final int e = st.entry(ws.id);
      final int held = Math.min(end, e >= 0 ? st.cuts[e] : 0);
      while (pend < held && runSeqs.seqAt(x, pend) == seqs[i + pend - from]) pend++;
    }
    // the names of the rest go in as a batch: the table grows at most once for them, and their
    // home slots are loaded together first (RunNames.touch)
    if (pend < end) ws.names.reserve(end - pend);
    if (end - pend >= TOUCH_MIN) ws.names.touch(seqs, i + pend - from, i + end - from);
    for (int j = pend; j < end; j++) {
      final long seq = seqs[i + j - from];
      if (lookup(ws, seq)) {
        if (foundNode == x && foundOff == j) {
          if (pend < j) hold(ws, x, pend, j);
          pend = j + 1;
          continue;
        }
        // the hash named another block: the newer store wins
        if (pend < j) hold(ws, x, pend, j);
        final RunNode prevNode = foundNode;
        final int prevOff = foundOff;
        unname(ws, seq);
        if (j > 0) {
          cursor.node = x;
          cursor.off = j - 1;
        } else {
          cursor.node = x.parent;
          cursor.off = x.parent.plain().length() - 1;
        }
        release(ws, prevNode, prevOff);
        return i + j - from;
      }
      if (j >= known) ws.names.putAt(foundSlot, seq, x, j); // its own hash: no check
      else name(ws, seq, x, j);
    }
    if (pend < end) hold(ws, x, pend, end);
    cursor.node = x;
    cursor.off = end - 1;
    return i + end - from;
  }

  /**
   * Marks the runs the store used that existed before it, at its end: a run it split afterwards
   * (where the chain left it) gave its tail the bit it had before the store, which the store did
   * not use.
   */
  private void markStoreUsed() {
    for (int k = 0; k < storeUsed.size(); k++) storeUsed.get(k).markUsed();
    storeUsed.clear();
  }

  private boolean parentConnected(int id, RunNode x) {
    final RunNode p = x.parent;
    if (p == root) return true;
    final RunState ps = p.plain();
    final int e = ps.entry(id);
    return e >= 0 && ps.ids[e] >= 0 && ps.cuts[e] == ps.length();
  }

  /** Records that {@code ws} holds blocks [from, to) of {@code x}, each under one new name. */
  private void hold(RunWorker ws, RunNode x, int from, int to) {
    final int id = ws.id;
    final RunState st = x.plain();
    final int e = st.entry(id);
    final int c = e >= 0 ? st.cuts[e] : 0;
    if (c < from) throw new IllegalStateException("hold past the worker's cut");
    for (int j = from; j < Math.min(c, to); j++) addAlias(ws, x, j);
    if (to <= c) return;
    final int added = to - c;
    final boolean connected = e >= 0 ? st.ids[e] >= 0 : parentConnected(id, x);
    ws.heldBlocks += added;
    counters.add(IndexCounters.BLOCKS_INDEXED, added);
    if (!connected) ws.detachedCount += added;
    final RunState ns = st.withEntry(id, connected ? id : ~id, to);
    touched.add(x);
    if (connected && to == st.length() && ws.detachedCount > 0 && hasChildWith(ns.children, ~id)) {
      beginStep();
      try {
        x.publish(ns);
        changedInStep();
        reconnectBelow(ws, x);
      } finally {
        endStep();
      }
    } else {
      x.publish(ns);
    }
  }

  /** Whether a child in {@code children} has the entry {@code signedId}. */
  private boolean hasChildWith(Object children, int signedId) {
    if (children == null) return false;
    childScratch.clear();
    RunNode.addChildren(children, childScratch);
    boolean found = false;
    for (int i = 0; i < childScratch.size() && !found; i++) {
      found = Arrays.binarySearch(childScratch.get(i).plain().ids, signedId) >= 0;
    }
    childScratch.clear();
    return found;
  }

  /** Turns {@code ws}'s detached entries below {@code x} (just connected in full) connected. */
  private void reconnectBelow(RunWorker ws, RunNode x) {
    final int id = ws.id;
    final ArrayDeque<RunNode> stack = new ArrayDeque<>();
    final List<RunNode> children = new ArrayList<>();
    pushWith(x.plain().children, ~id, stack, children);
    while (!stack.isEmpty()) {
      final RunNode y = stack.pop();
      final RunState ys = y.plain();
      final int c = ys.cuts[Arrays.binarySearch(ys.ids, ~id)];
      y.publish(ys.withEntry(id, id, c));
      touched.add(y);
      ws.detachedCount -= c;
      changedInStep(); // root first: every connected entry's parent is connected
      if (ws.detachedCount == 0) return;
      if (c == ys.length()) pushWith(ys.children, ~id, stack, children);
    }
  }

  private static void pushWith(
      Object ch, int signedId, ArrayDeque<RunNode> stack, List<RunNode> scratch) {
    scratch.clear();
    RunNode.addChildren(ch, scratch);
    for (RunNode c : scratch) {
      if (Arrays.binarySearch(c.plain().ids, signedId) >= 0) stack.push(c);
    }
    scratch.clear();
  }

  /** Undoes one hold of block ({@code x}, {@code off}) by {@code ws}, whose name was dropped. */
  private void release(RunWorker ws, RunNode x, int off) {
    if (removeAlias(ws, x, off)) return;
    final int id = ws.id;
    RunState st = x.plain();
    int e = st.entry(id);
    if (e < 0 || st.cuts[e] <= off) throw new IllegalStateException("release of an unheld block");
    if (off < st.cuts[e] - 1) {
      // not the worker's last block of the run: its blocks after it go to a run of their own
      split(x, off + 1);
      st = x.plain();
      e = st.entry(id);
    }
    ws.heldBlocks--;
    counters.add(IndexCounters.BLOCKS_INDEXED, -1);
    touched.add(x);
    if (st.ids[e] < 0) {
      ws.detachedCount--;
      x.publish(st.withEntry(id, ~id, off));
      return;
    }
    if (st.cuts[e] == st.length() && hasChildWith(st.children, id)) {
      beginStep();
      try {
        detachBelow(ws, x);
        x.publish(x.plain().withEntry(id, id, off));
      } finally {
        endStep();
      }
    } else {
      x.publish(st.withEntry(id, id, off));
    }
  }

  /** Turns {@code ws}'s connected entries below {@code x} detached, leaf first. */
  private void detachBelow(RunWorker ws, RunNode x) {
    final int id = ws.id;
    final List<RunNode> order = new ArrayList<>();
    final ArrayDeque<RunNode> stack = new ArrayDeque<>();
    final List<RunNode> children = new ArrayList<>();
    stack.push(x);
    while (!stack.isEmpty()) {
      final RunNode n = stack.pop();
      children.clear();
      RunNode.addChildren(n.plain().children, children);
      for (RunNode c : children) {
        final RunState cs = c.plain();
        final int p = Arrays.binarySearch(cs.ids, id);
        if (p >= 0) {
          order.add(c);
          if (cs.cuts[p] == cs.length()) stack.push(c);
        }
      }
    }
    for (int k = order.size() - 1; k >= 0; k--) {
      final RunNode y = order.get(k);
      final RunState ys = y.plain();
      final int c = ys.cuts[Arrays.binarySearch(ys.ids, id)];
      y.publish(ys.withEntry(id, ~id, c));
      touched.add(y);
      ws.detachedCount += c;
      changedInStep();
    }
  }

  private void remove(RunWorker ws, CacheEvent.Removed r) {
    final long[] seqs = r.blockHashes();
    counters.inc(IndexCounters.REMOVED_EVENTS);
    if (ws == null) {
      counters.add(IndexCounters.BLOCKS_MISSING, seqs.length);
      return;
    }
    // A run of the worker's blocks of one node listed deepest first (how engines evict) is one
    // change: after the run's first block, each next one is the worker's last block in the
    // node, so its removal only lowers the cut; the cut is published once for the run.
    // An event that lists a chain from the top (a parent block, then its child: one Removed per
    // eviction names each evicted leaf's blocks that way) is taken in reverse, deepest first: each
    // block is then the worker's last and only lowers its cut. In the listed order every block
    // but the last would split its run, moving the rest of the run and every child of the node
    // (issue 35: in simulate, such splits and the merges that undid them were most of the CPU).
    // The order within an event changes no final state, only which intermediate ones readers see
    // (each a prefix-closed state whatever the order).
    // Each block is looked up once: chainFrom notes the slot of every name it found (chainSlots),
    // and the names leave the table by those slots, which stay put because the table does not
    // shrink until the event's end (RunNames.removeAtKeepingCapacity, then one shrinkIfSparse).
    try {
      if (seqs.length >= TOUCH_MIN) ws.names.touch(seqs, 0, seqs.length);
      removeBlocks(ws, seqs);
    } finally {
      ws.names.shrinkIfSparse();
    }
  }

  private void removeBlocks(RunWorker ws, long[] seqs) {
    RunNode pend = null; // the node whose cut is pending, or null
    int pendCut = 0;
    int pendSigned = 0;
    for (int i = 0; i < seqs.length; ) {
      final boolean noAliases = ws.aliases == null || ws.aliases.isEmpty();
      final int chain = noAliases ? chainFrom(ws, seqs, i) : 1;
      for (int k = i + chain - 1; k >= i; k--) {
        final long seq = seqs[k];
        final int noted = noAliases && k - i < chainSlots.length ? chainSlots[k - i] : UNNOTED;
        if (noted >= 0) {
          // the slot chainFrom found: splits and merges repoint a slot in place, and nothing
          // in between removed or moved it
          foundSlot = noted;
          foundNode = ws.names.nodeAt(noted);
          foundOff = ws.names.offAt(noted);
          ws.names.removeAtKeepingCapacity(noted);
        } else if (noted == NOT_NAMED || !lookup(ws, seq)) {
          counters.inc(IndexCounters.BLOCKS_MISSING);
          continue;
        } else if (foundSlot >= 0) {
          ws.names.removeAtKeepingCapacity(foundSlot);
        } else {
          ws.others.remove(seq);
        }
        final RunNode x = foundNode;
        final int off = foundOff;
        if (x == pend && off == pendCut - 1 && (ws.aliases == null || ws.aliases.isEmpty())) {
          pendCut = off;
          continue;
        }
        if (pend != null) publishCut(ws, pend, pendSigned, pendCut);
        pend = null;
        if (ws.aliases == null || ws.aliases.isEmpty()) {
          // Fast path (vLLM's one Removed per evicted block): the block is the worker's last of its
          // cut in x, and its entry is detached or strands no connected entry in a child. Then only
          // its cut drops: no split, no detach; the cut is published once, by publishCut.
          final RunState st = x.plain();
          final int e = st.entry(ws.id);
          if (e >= 0
              && st.cuts[e] == off + 1
              && (st.ids[e] < 0 || off + 1 < st.length() || !hasChildWith(st.children, ws.id))) {
            pend = x;
            pendCut = off;
            pendSigned = st.ids[e];
            continue;
          }
        }
        release(ws, x, off);
        if (!x.dead) {
          final RunState st = x.plain();
          final int e = st.entry(ws.id);
          if (e >= 0 && st.cuts[e] == off) {
            pend = x;
            pendCut = off;
            pendSigned = st.ids[e];
          }
        }
      }
      i += chain;
    }
    if (pend != null) publishCut(ws, pend, pendSigned, pendCut);
  }

  /**
   * How many of {@code seqs[i..]} name a chain of {@code ws}'s blocks from the top, each the child
   * of the one before (the next offset of the same run, or offset 0 of a child run after the run's
   * last block); at least 1. Only looks.
   */
  private int chainFrom(RunWorker ws, long[] seqs, int i) {
    if (!lookup(ws, seqs[i])) {
      note(0, NOT_NAMED);
      return 1;
    }
    note(0, foundSlot >= 0 ? foundSlot : UNNOTED);
    RunNode x = foundNode;
    int off = foundOff;
    int j = i + 1;
    while (j < seqs.length && lookup(ws, seqs[j])) {
      final RunNode y = foundNode;
      final int o = foundOff;
      final boolean child =
          y == x ? o == off + 1 : o == 0 && y.parent == x && off == x.plain().length() - 1;
      if (!child) break;
      note(j - i, foundSlot >= 0 ? foundSlot : UNNOTED);
      x = y;
      off = o;
      j++;
    }
    return j - i;
  }

  /** Notes at chainSlots[k] what chainFrom found for the chain's k-th block (bounded scratch). */
  private void note(int k, int slot) {
    if (k >= chainSlots.length) {
      if (k >= MAX_NOTED) return; // past the scratch's bound: the removal looks the block up
      chainSlots =
          Arrays.copyOf(chainSlots, Math.min(MAX_NOTED, Math.max(k + 1, chainSlots.length * 2)));
    }
    chainSlots[k] = slot;
  }

  /**
   * Lowers {@code ws}'s cut in {@code x} to {@code cut}, counting the blocks it drops: one new
   * state. A cut that stays above 0 changes no node's holder set, so nothing can be pruned or
   * merged because of it (mergeable looks at the child's holders and their cuts in the parent, and
   * the worker, whose last blocks of x went, is not connected in a child of x unless the caller
   * took the slow path); only a childless run may have lost the last holder of its tail (trimTail).
   * Such a node is therefore not settled; a dropped entry is.
   */
  private void publishCut(RunWorker ws, RunNode x, int signedId, int cut) {
    final RunState st = x.plain();
    final int e = st.entry(ws.id);
    final int dropped = st.cuts[e] - cut;
    if (dropped == 0) return;
    ws.heldBlocks -= dropped; // one volatile write for the run
    counters.add(IndexCounters.BLOCKS_INDEXED, -dropped);
    if (signedId < 0) ws.detachedCount -= dropped;
    if (cut > 0 && st.ids[e] == signedId) {
      final RunState ns = st.withCut(e, cut);
      x.publish(ns);
      if (ns.children == null) trimTail(x, ns);
    } else {
      x.publish(st.withEntry(ws.id, signedId, cut));
      touched.add(x);
    }
  }

  /**
   * Drops up to {@code max} of {@code ws}'s blocks of {@code x} from the tail of its cut, with
   * every name it has for them, when the rule of RunBound lets them go (a detached entry, or a
   * connected one that holds no child of the run): a Removed of leaves, deepest first, published as
   * one cut. Returns how many went; sets lastDropEmptiedConnected. The caller settles. Writer-only.
   */
  int dropTail(RunWorker ws, RunNode x, long max) {
    lastDropEmptiedConnected = false;
    final RunState st = x.plain();
    final int e = st.entry(ws.id);
    if (e < 0 || max <= 0) return 0;
    final int signed = st.ids[e];
    final int c = st.cuts[e];
    if (signed >= 0 && c == st.length() && hasChildWith(st.children, signed)) return 0;
    final int k = (int) Math.max(0, c - max);
    final ClockBound.EvictionListener listener = bound == null ? null : bound.evictionListener;
    final List<long[]> told = listener == null ? null : new ArrayList<>(); // (offset, name)
    final RunNames names = ws.names;
    for (int j = c - 1; j >= k; j--) {
      final long seq = runSeqs.seqAt(x, j);
      final int i = names.find(seq);
      if (i >= 0 && names.nodeAt(i) == x && names.offAt(i) == j) {
        names.removeAt(i);
        if (told != null) told.add(new long[] {j, seq});
      }
    }
    if (ws.others != null && !ws.others.isEmpty()) {
      final var it = ws.others.long2ObjectEntrySet().iterator();
      while (it.hasNext()) {
        final Long2ObjectMap.Entry<RunWorker.Ref> en = it.next();
        final RunWorker.Ref r = en.getValue();
        if (r.node == x && r.off >= k) {
          if (told != null) told.add(new long[] {r.off, en.getLongKey()});
          it.remove();
        }
      }
    }
    if (told != null) {
      told.sort((p, q) -> Long.compare(q[0], p[0])); // deepest first, as a Removed of leaves
      for (long[] t : told) listener.evicted(ws.worker, t[1], pathOf(x, (int) t[0]));
    }
    if (ws.aliases != null) ws.aliases.removeIf(r -> r.node == x && r.off >= k);
    final int dropped = c - k;
    ws.heldBlocks -= dropped;
    if (signed < 0) ws.detachedCount -= dropped;
    counters.add(IndexCounters.BLOCKS_INDEXED, -dropped);
    counters.add(IndexCounters.EVICTED_BLOCKS, dropped);
    x.publish(st.withEntry(ws.id, signed, k));
    touched.add(x);
    lastDropEmptiedConnected = k == 0 && signed >= 0;
    return dropped;
  }

  /** The local hashes from the top down to block ({@code x}, {@code off}) (tests' listener). */
  private long[] pathOf(RunNode x, int off) {
    int n = off + 1;
    for (RunNode a = x.parent; a != root; a = a.parent) n += a.plain().length();
    final long[] out = new long[n];
    int end = n - off - 1;
    System.arraycopy(x.plain().locals, 0, out, end, off + 1);
    for (RunNode a = x.parent; a != root; a = a.parent) {
      final RunState as = a.plain();
      end -= as.length();
      System.arraycopy(as.locals, 0, out, end, as.length());
    }
    return out;
  }

  /** The nodes where {@code ws} has an entry: those of the blocks it names. */
  private List<RunNode> nodesOf(RunWorker ws) {
    final IdentityHashMap<RunNode, Boolean> seen = new IdentityHashMap<>();
    final List<RunNode> out = new ArrayList<>();
    final RunNames names = ws.names;
    for (int i = 0, end = names.scanEnd(); i < end; i++) {
      final RunNode n = names.nodeAt(i);
      if (n != null && seen.put(n, Boolean.TRUE) == null) out.add(n);
    }
    if (ws.others != null) {
      for (RunWorker.Ref r : ws.others.values()) {
        if (seen.put(r.node, Boolean.TRUE) == null) out.add(r.node);
      }
    }
    return out;
  }

  private int depthOf(RunNode n) {
    int d = 0;
    for (RunNode a = n; a != root; a = a.parent) d++;
    return d;
  }

  /** Drops every block of {@code ws}, deepest node first, in steps. */
  private void clear(RunWorker ws) {
    final List<RunNode> nodes = nodesOf(ws);
    if (nodes.isEmpty()) return;
    final int id = ws.id;
    final long[] keys = new long[nodes.size()];
    for (int i = 0; i < keys.length; i++) keys[i] = (long) -depthOf(nodes.get(i)) << 32 | i;
    Arrays.sort(keys);
    beginStep();
    try {
      for (long k : keys) {
        final RunNode n = nodes.get((int) k);
        final RunState st = n.plain();
        final int e = st.entry(id);
        if (e < 0) continue;
        final int c = st.cuts[e];
        n.publish(st.withEntry(id, st.ids[e], 0));
        touched.add(n);
        ws.heldBlocks -= c;
        counters.add(IndexCounters.BLOCKS_INDEXED, -c);
        changedInStep();
      }
    } finally {
      endStep();
    }
    ws.names.clear();
    ws.others = null;
    ws.aliases = null;
    ws.heldBlocks = 0;
    ws.detachedCount = 0;
  }

  @Override
  public void clearWorker(long workerId) {
    lock();
    try {
      for (RunWorker ws : ranksOf(workerId)) clear(ws);
    } finally {
      try {
        settleTouched();
      } finally {
        unlock(); // even when settling fails: a held lock would stop every later writer
      }
    }
  }

  @Override
  public void removeWorker(long workerId) {
    lock();
    try {
      for (RunWorker ws : ranksOf(workerId)) {
        clear(ws);
        workerIds.removeInt(ws.worker);
        ws.forgotten = true;
        counters.add(IndexCounters.WORKERS, -1);
      }
    } finally {
      try {
        settleTouched();
      } finally {
        unlock(); // even when settling fails: a held lock would stop every later writer
      }
    }
  }

  // ------------------------------------------------------------------ dump, stats

  /** {@code ws}'s name of block ({@code x}, {@code off}). */
  private long nameOf(
      RunWorker ws, RunNode x, int off, Map<RunNode, Int2LongOpenHashMap> otherNames) {
    final long seq = runSeqs.seqAt(x, off);
    final int i = ws.names.find(seq);
    if (i >= 0 && ws.names.nodeAt(i) == x && ws.names.offAt(i) == off) return seq;
    final Int2LongOpenHashMap m = otherNames == null ? null : otherNames.get(x);
    if (m != null && m.containsKey(off)) return m.get(off);
    throw new IllegalStateException("a held block without a name");
  }

  @Override
  public List<RouterEvent> dump() {
    lock();
    try {
      final List<RunWorker> workers = live();
      final Map<RunWorker, List<RouterEvent>> events = new HashMap<>();
      final Map<RunWorker, Map<RunNode, Int2LongOpenHashMap>> otherNames = new HashMap<>();
      for (RunWorker ws : workers) {
        events.put(ws, new ArrayList<>());
        if (ws.others != null && !ws.others.isEmpty()) {
          IdentityHashMap<RunNode, Int2LongOpenHashMap> m = new IdentityHashMap<>();
          for (Long2ObjectMap.Entry<RunWorker.Ref> en : ws.others.long2ObjectEntrySet()) {
            RunWorker.Ref r = en.getValue();
            m.computeIfAbsent(r.node, k -> new Int2LongOpenHashMap()).put(r.off, en.getLongKey());
          }
          otherNames.put(ws, m);
        }
      }
      final ArrayDeque<RunNode> queue = new ArrayDeque<>();
      final List<RunNode> children = new ArrayList<>();
      RunNode.addChildren(root.plain().children, children);
      queue.addAll(children);
      while (!queue.isEmpty()) {
        final RunNode x = queue.poll();
        final RunState st = x.plain();
        for (int i = RunState.connectedFrom(st.ids); i < st.ids.length; i++) {
          final RunWorker ws = byId(st.ids[i]);
          final Map<RunNode, Int2LongOpenHashMap> on = otherNames.get(ws);
          final int c = st.cuts[i];
          final long[] names = new long[c];
          for (int j = 0; j < c; j++) names[j] = nameOf(ws, x, j, on);
          final List<RouterEvent> out = events.get(ws);
          final CacheEvent ev;
          if (x.parent == root) {
            ev = CacheEvent.storedAtRoot(names, Arrays.copyOf(st.locals, c));
          } else {
            final RunNode p = x.parent;
            final long parentName = nameOf(ws, p, p.plain().length() - 1, on);
            ev = CacheEvent.stored(parentName, names, Arrays.copyOf(st.locals, c));
          }
          out.add(new RouterEvent(ws.worker, out.size(), ev));
        }
        children.clear();
        RunNode.addChildren(st.children, children);
        queue.addAll(children);
      }
      final List<RouterEvent> all = new ArrayList<>();
      for (RunWorker ws : workers) {
        final List<RouterEvent> mine = events.get(ws);
        if (mine.isEmpty()) all.add(new RouterEvent(ws.worker, 0, CacheEvent.cleared()));
        else all.addAll(mine);
      }
      return all;
    } finally {
      unlock();
    }
  }

  @Override
  public long[] workerIds() {
    lock();
    try {
      return live().stream().mapToLong(ws -> ws.worker.workerId()).distinct().sorted().toArray();
    } finally {
      unlock();
    }
  }

  @Override
  public int blockCount(Worker worker) {
    lock();
    try {
      final RunWorker ws = findWorker(worker);
      return ws == null ? 0 : ws.heldBlocks - ws.detachedCount;
    } finally {
      unlock();
    }
  }

  /** The nodes in the tree now, the root not counted. Writer-side (takes the lock). */
  int nodeCount() {
    lock();
    try {
      int count = 0;
      final ArrayDeque<RunNode> stack = new ArrayDeque<>();
      final List<RunNode> children = new ArrayList<>();
      stack.push(root);
      while (!stack.isEmpty()) {
        final RunNode x = stack.pop();
        children.clear();
        RunNode.addChildren(x.plain().children, children);
        count += children.size();
        for (RunNode c : children) stack.push(c);
      }
      return count;
    } finally {
      unlock();
    }
  }

  /** The blocks of every run in the tree now, held or not. Writer-side (takes the lock). */
  long structureBlocks() {
    lock();
    try {
      long blocks = 0;
      final ArrayDeque<RunNode> stack = new ArrayDeque<>();
      final List<RunNode> children = new ArrayList<>();
      stack.push(root);
      while (!stack.isEmpty()) {
        final RunNode x = stack.pop();
        blocks += x.plain().length();
        children.clear();
        RunNode.addChildren(x.plain().children, children);
        for (RunNode c : children) stack.push(c);
      }
      return blocks;
    } finally {
      unlock();
    }
  }

  /**
   * An estimate of the heap the index retains, from its structure (compressed references, 16-byte
   * array headers): every node and state with their arrays and child tables, and every worker's
   * name table. Deterministic, for tests that check memory returns to a bound after churn; the
   * measured figure is IndexFootprint's (kvrouter-bench). Writer-side (takes the lock).
   */
  long footprintBytes() {
    lock();
    try {
      long bytes = 0;
      final ArrayDeque<RunNode> stack = new ArrayDeque<>();
      final List<RunNode> children = new ArrayList<>();
      stack.push(root);
      while (!stack.isEmpty()) {
        final RunNode x = stack.pop();
        final RunState st = x.plain();
        // RunNode 48 and RunState 40 bytes (JOL, compressed oops), its arrays with headers (seqs
        // only where the hashes depart from §2), its id's slot in RunSeqs
        bytes += 48 + 40 + 4 + 16 + 8L * st.locals.length + 2 * (16 + 4L * st.ids.length);
        if (st.seqs != null) bytes += 16 + 8L * st.seqs.length;
        if (st.children instanceof RunChildren t) bytes += 32 + 16 + 4L * t.capacity();
        children.clear();
        RunNode.addChildren(st.children, children);
        for (RunNode c : children) stack.push(c);
      }
      for (RunWorker ws : live()) {
        bytes += 48 + 16 + 16 + 8L * ws.names.capacity();
        if (ws.others != null) bytes += 48 + 32L * ws.others.size();
      }
      return bytes;
    } finally {
      unlock();
    }
  }

  @Override
  public void flush() {}

  @Override
  public IndexStats stats() {
    return counters.stats();
  }

  @Override
  public void close() {}

  /**
   * References in the bounded tree's clock queue (0 when unbounded). Writer-side (takes the lock).
   */
  int clockSize() {
    lock();
    try {
      return bound == null ? 0 : bound.clockSize();
    } finally {
      unlock();
    }
  }

  /** The bounded tree's running count of linked nodes (0 when unbounded). Takes the lock. */
  long linkedNodes() {
    lock();
    try {
      return bound == null ? 0 : bound.linkedNodes;
    } finally {
      unlock();
    }
  }

  @Override
  public String toString() {
    final String kind = writeLock != null ? "concurrentCompressedTree" : "compressedTree";
    return bound == null ? kind : kind + "(" + bound.maxBlocks + ")";
  }
}
