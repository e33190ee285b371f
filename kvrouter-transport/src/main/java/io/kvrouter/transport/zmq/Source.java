package io.kvrouter.transport.zmq;

import static java.util.Objects.requireNonNull;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.kvevents.ConvertedBatch;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import io.kvrouter.transport.kvevents.GroupEvent;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.KvEventDecodeException;
import io.kvrouter.transport.kvevents.KvEventDecoder;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/** One engine publisher as the subscriber tracks it: its sequence numbers, replay and converter. */
final class Source {
  /*
   * Implementation notes
   *
   * Thread ownership: every method runs on the subscriber's thread; only lastApplied and
   * lastMessageNanos are read elsewhere (lastSequence(), nanosSinceLastMessage()), so they alone
   * are volatile. lastApplied is written after the batch's counters and sink calls, so a reader
   * that sees it also sees them.
   *
   * State: lastApplied is the highest sequence number dealt with (applied, rejected as
   * malformed, or given up as lost), -1 before the first; lastPayload is that message's payload
   * (null when it was lost); lastLive is the highest sequence number seen on the live socket.
   * The next message to apply is always lastApplied + 1, so a new source starts at 0: a first
   * message with a higher number is a gap like any other, which is how a subscriber that joined
   * late replays from 0 (slow joiner).
   *
   * Live message s:
   *   s <= lastLive            the live stream went back: a duplicate or a late message (a
   *                            proxy between engine and router may repeat or reorder), or the
   *                            engine restarted. isRepeat() tells them apart: the last batch
   *                            applied byte for byte, or a catch-up whose anchor still holds,
   *                            means a repeat; a changed history restarts (in catchUp()); with
   *                            no replay endpoint a restart is assumed -> restart()
   *   s <= lastApplied         already applied through replay -> duplicate
   *   s >  lastApplied + 1     gap -> catchUp() if the engine has a replay endpoint; when the
   *                            replay worked and still ends before s, s is not in the engine's
   *                            history (a message from before a restart, held up on the way)
   *                            and is skipped; without replay, or when the replay failed, what
   *                            is still missing is counted lost
   *   then apply(s).
   *
   * catchUp() asks for everything from lastApplied (not lastApplied + 1): the first answer must
   * be the batch we applied last, byte for byte ("anchor"). A different payload there, or an
   * end marker with nothing at or after it, means the engine's history is not the one we
   * followed: it restarted, possibly more messages ago than the live stream shows (a restart
   * while we were disconnected leaves no backwards step on the live socket). Then restart() and
   * replay from 0. The subscriber calls catchUp() on gaps and after each completed connection
   * (at once, and once more a moment later, since the subscription may become active after the
   * first replay was answered).
   *
   * Rebuild from 0: when the source applies sequence 0 with nothing applied before (a new
   * subscriber, live or through replay), it follows the engine's whole history, so each rank the
   * history names gets a Cleared before its first batch (ranksCleared; restart() has cleared the
   * ranks it knew already). A subscriber that starts on an index warm-started from a peer's dump
   * thus drops what the dump held of that engine and rebuilds it exactly, even if the engine
   * restarted after the dump was taken. When the buffer
   * no longer starts at 0, the suffix is applied over the dump: replaying batches the dump
   * already reflects converges to the engine's state, because an engine evicts a block only
   * after its descendants and every event is a set insert or delete.
   *
   * A long answer can arrive with holes: the engine's ROUTER drops replies when its send queue to
   * us is full (ZMQ's high-water mark, 1,000 by default), end marker included. An engine's buffer
   * holds consecutive batches, so a jump after the first reply, or a silence after some replies,
   * means replies were dropped on the way: the catch-up asks again from the last batch applied
   * (up to MAX_RESUMES times per catch-up; each one makes progress) instead of counting a loss.
   *
   * restart(): the converter hands back Cleared for every (rank, tier) it published for, those
   * go to the sink, and the sequence state starts over at -1.
   *
   * Tail probe: nothing in vLLM's protocol announces the last sequence, so when the live socket
   * drops the tail of a burst (the engine's PUB high-water mark), no gap shows until the engine
   * publishes again. lastMessageNanos (volatile: the staleness gauges read it) is the time of the
   * last live message; once the engine has been silent for the subscriber's tail-probe delay,
   * the subscriber calls probeTail(): an ordinary catch-up from lastApplied, whose replayed
   * batches are the lost tail. While the silence lasts, it probes again after twice the previous
   * pause (up to a minute; probesSinceMessage and lastProbeNanos, reset by the next live
   * message), since a burst whose every message was dropped leaves no live message to start from.
   */

  private static final Logger LOG = Logger.getLogger(ZmqEventSubscriber.class.getName());
  private static final long STALE_RECHECK_NANOS = 100_000_000L;
  private static final int MAX_RESUMES = 16;

  final EngineSpec spec;
  private final String name;
  private final EngineEventConverter converter;
  private final @Nullable Replay replay; // null: the engine has no replay endpoint
  private final SingleWriterCounters<Counters.C> counters;
  private final IngestSink sink;
  private final long replayTimeoutMs;
  private final BooleanSupplier running;

  /**
   * Whether the history followed now was applied from its sequence 0: then each rank it names is
   * cleared before its first batch, unless restart() just cleared it (see the notes).
   */
  private boolean fromZero;

  /** The ranks cleared in the history followed now. */
  private final Set<Integer> ranksCleared = new HashSet<>();

  private int lastRank;
  private boolean hasLastRank;
  // group problems seen (docs/routing.md, "Hybrid models"), for the log's rate; subscriber thread
  private long groupProblems;

  private volatile long lastApplied = -1;

  /** {@link System#nanoTime()} of the last live message, 0 before the first. */
  private volatile long lastMessageNanos;

  /** Tail probes since the last live message, and when the last one ran (see probeTail). */
  private int probesSinceMessage;

  private long lastProbeNanos;

  private long lastLive = -1;
  private byte @Nullable [] lastPayload;

  /** Catch up at the next turn of the loop. */
  boolean resyncNow;

  /** Catch up once {@link System#nanoTime()} passes this (0: not scheduled). */
  long resyncAt;

  Source(
      EngineSpec spec,
      EngineEventConverter converter,
      @Nullable Replay replay,
      SingleWriterCounters<Counters.C> counters,
      IngestSink sink,
      long replayTimeoutMs,
      BooleanSupplier running) {
    this.spec = spec;
    this.name =
        "engine "
            + Long.toUnsignedString(spec.workerId())
            + (spec.topic().isEmpty() ? "" : " (topic \"" + spec.topic() + "\")");
    this.converter = converter;
    this.replay = replay;
    this.counters = counters;
    this.sink = sink;
    this.replayTimeoutMs = replayTimeoutMs;
    this.running = running;
  }

  boolean hasReplay() {
    return replay != null;
  }

  long lastApplied() {
    return lastApplied;
  }

  /** {@link System#nanoTime()} of the last live message; 0 before the first. */
  long lastMessageNanos() {
    return lastMessageNanos;
  }

  /** The longest pause between two tail probes of a silent engine. */
  static final long MAX_PROBE_INTERVAL_NANOS = 60_000_000_000L;

  /**
   * Whether the tail should be probed at {@code now}: the engine has a replay endpoint and
   * published something, and has been silent for {@code silenceNanos} since its last live message
   * (first probe), or for twice as long as before since the last probe (later ones, up to a minute
   * apart): a burst lost whole shows no live message either.
   */
  boolean tailProbeDue(long now, long silenceNanos) {
    long last = lastMessageNanos;
    if (replay == null || last == 0) return false;
    if (probesSinceMessage == 0) return now - last >= silenceNanos;
    long wait =
        probesSinceMessage >= 30
            ? MAX_PROBE_INTERVAL_NANOS
            : Math.min(MAX_PROBE_INTERVAL_NANOS, silenceNanos << probesSinceMessage);
    return now - lastProbeNanos >= wait;
  }

  /**
   * The engine fell silent after publishing: asks its replay buffer for what follows the last batch
   * applied, since a burst whose tail the live socket dropped (the engine's send high-water mark)
   * shows no gap until the engine publishes again. What comes back is applied and counted in
   * TAIL_RECOVERED.
   */
  void probeTail() {
    probesSinceMessage++;
    counters.inc(Counters.C.TAIL_PROBES);
    long replayedBefore = counters.get(Counters.C.REPLAYED);
    long before = lastApplied;
    catchUp();
    lastProbeNanos = System.nanoTime();
    long recovered = counters.get(Counters.C.REPLAYED) - replayedBefore;
    if (recovered > 0) {
      long n = counters.add(Counters.C.TAIL_RECOVERED, recovered);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(
            name
                + ": silent after batch "
                + before
                + ", but its replay buffer held "
                + recovered
                + " more (through "
                + lastApplied
                + "): the live socket lost the tail of a burst; recovered through replay");
      }
    }
  }

  /** A message from the live socket. */
  void onLive(long s, byte[] payload) {
    lastMessageNanos = nanoTimeNonZero();
    probesSinceMessage = 0;
    if (lastLive >= 0 && s <= lastLive && !isRepeat(s, payload)) {
      restart("its sequence went back from " + lastLive + " to " + s);
    }
    try {
      if (s <= lastApplied) {
        counters.inc(Counters.C.DUPLICATES);
        return;
      }
      if (s > lastApplied + 1) {
        counters.inc(Counters.C.GAPS);
        if (replay != null) {
          CatchUp outcome = catchUp();
          if (s <= lastApplied) {
            counters.inc(Counters.C.DUPLICATES);
            return;
          }
          if (outcome != CatchUp.FAILED) {
            // the engine replayed its history up to its newest batch and s was not in it: a late
            // message from before the engine restarted, not part of the history followed now.
            // Ask again a moment later, in case the engine buffers a batch only after sending it.
            resyncAt = System.nanoTime() + STALE_RECHECK_NANOS;
            long n = counters.inc(Counters.C.DUPLICATES);
            if (SingleWriterCounters.shouldLog(n)) {
              LOG.info(name + ": batch " + s + " is not in the engine's history; skipped as stale");
            }
            return;
          }
        }
        if (s > lastApplied + 1) {
          lose(lastApplied + 1, s - 1, replay == null ? "no replay endpoint" : "not in the replay");
        }
      }
      apply(s, payload);
    } finally {
      lastLive = s;
    }
  }

  /**
   * Whether live message {@code s}, at or below the highest sequence number seen live, is one this
   * source already dealt with (a duplicate, or a late message that replay already applied) rather
   * than the first sign of a restart. The last batch applied, byte for byte, is a repeat. Otherwise
   * only the engine can tell: a catch-up checks the anchor and restarts the source itself when the
   * history changed; when it holds, the message is a repeat. Without a replay endpoint there is no
   * way to tell, and a restart is assumed (clearing only costs cache misses).
   */
  private boolean isRepeat(long s, byte[] payload) {
    if (s == lastApplied && lastPayload != null && Arrays.equals(payload, lastPayload)) {
      return true;
    }
    if (replay == null) {
      return false;
    }
    boolean anchored = lastApplied >= 0 && lastPayload != null; // else the history is unchecked
    return switch (catchUp()) {
      case RESTARTED -> true; // the source restarted and replayed the new history already
      case CONFIRMED -> anchored;
      case FAILED -> false;
    };
  }

  /** How a catch-up ended. */
  enum CatchUp {
    /** The engine replayed up to its newest batch, continuing the history followed. */
    CONFIRMED,
    /** The engine's history was another one: the source restarted and replayed it. */
    RESTARTED,
    /** No replay endpoint, or the replay was abandoned (no answer, a bad answer, closing). */
    FAILED
  }

  /**
   * Replays what this source missed since {@link #lastApplied} (see the notes). An unexpected
   * failure (a replay endpoint ZMQ rejects, say) abandons the replay like a timeout does, so the
   * live stream goes on.
   */
  CatchUp catchUp() {
    Replay replay = this.replay;
    if (replay == null) {
      return CatchUp.FAILED;
    }
    try {
      return replayMissed(replay);
    } catch (RuntimeException e) {
      long n = counters.inc(Counters.C.REPLAY_FAILURES);
      replay.reset();
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.log(Level.WARNING, name + ": replay from " + replay.endpoint() + " failed", e);
      }
      return CatchUp.FAILED;
    }
  }

  private CatchUp replayMissed(Replay replay) {
    boolean restarted = false;
    int attempts = 0;
    int resumes = 0;
    while (attempts < 2 && running.getAsBoolean()) {
      // ask from the last batch applied, to check it is still the engine's; after a loss there
      // is nothing to check against, so ask from the first one missing
      final boolean anchored = lastApplied >= 0 && lastPayload != null;
      final long start = anchored ? lastApplied : lastApplied + 1;
      counters.inc(Counters.C.REPLAYS);
      if (!replay.request(start)) {
        fail(replay, "the request could not be sent");
        return CatchUp.FAILED;
      }
      boolean first = true;
      boolean answered = false; // a reply of this replay was taken in
      boolean resume = false; // the answer lost messages on the way: ask again from where it broke
      String history = null;
      while (true) {
        Replay.Reply r = replay.next(replayTimeoutMs, running);
        if (r == null) {
          if (!running.getAsBoolean()) {
            replay.reset();
            return CatchUp.FAILED;
          }
          if (answered && resumes < MAX_RESUMES) {
            resume = true; // the tail of a long answer, end marker included, did not come
            replay.reset();
            break;
          }
          fail(replay, "no answer within " + replayTimeoutMs + " ms");
          return CatchUp.FAILED;
        }
        String problem = r.problem();
        if (problem != null) { // r.isBad()
          fail(replay, problem);
          return CatchUp.FAILED;
        }
        if (r.isEnd()) {
          if (anchored && first) {
            history = "its replay buffer holds nothing at or after sequence " + start;
          }
          break;
        }
        if (anchored && first) {
          first = false;
          if (r.seq() == start) {
            answered = true;
            if (!Arrays.equals(r.payload(), lastPayload)) {
              history = "its replay of sequence " + start + " differs from the batch applied";
              replay.reset(); // drop the rest of this answer
              break;
            }
            continue; // the anchor holds: what follows continues our history
          }
        }
        first = false;
        if (r.seq() <= lastApplied) {
          answered = true;
          continue;
        }
        if (r.seq() > lastApplied + 1) {
          if (answered && resumes < MAX_RESUMES) {
            // an engine's buffer holds consecutive batches, so a jump inside an answer means
            // the engine's socket dropped replies (its send queue was full)
            resume = true;
            replay.reset();
            break;
          }
          lose(lastApplied + 1, r.seq() - 1, "not in the replay buffer any more");
        }
        answered = true;
        counters.inc(Counters.C.REPLAYED);
        apply(r.seq(), requireNonNull(r.payload(), "a batch reply without a payload"));
      }
      if (resume) {
        resumes++;
        continue;
      }
      if (history == null) {
        return restarted ? CatchUp.RESTARTED : CatchUp.CONFIRMED;
      }
      restart(history);
      restarted = true;
      attempts++;
    }
    return restarted ? CatchUp.RESTARTED : CatchUp.FAILED;
  }

  private void fail(Replay replay, String why) {
    long n = counters.inc(Counters.C.REPLAY_FAILURES);
    replay.reset();
    if (SingleWriterCounters.shouldLog(n)) {
      LOG.warning(name + ": replay from " + replay.endpoint() + " abandoned: " + why);
    }
  }

  private void lose(long from, long to, String why) {
    long n = counters.add(Counters.C.LOST, to - from + 1);
    lastApplied = to;
    lastPayload = null;
    if (SingleWriterCounters.shouldLog(counters.get(Counters.C.GAPS))
        || SingleWriterCounters.shouldLog(n)) {
      LOG.warning(
          name
              + ": lost "
              + (from == to ? "batch " + from : "batches " + from + ".." + to)
              + " ("
              + why
              + "); the index may miss what they held");
    }
  }

  /** The engine restarted: clear what it published and start over at sequence 0. */
  void restart(String why) {
    long n = counters.inc(Counters.C.RESTARTS);
    if (SingleWriterCounters.shouldLog(n)) {
      LOG.warning(name + " restarted: " + why + "; clearing its blocks and starting over");
    }
    ranksCleared.clear();
    for (TieredEvent e : converter.reset()) {
      deliver(e);
      ranksCleared.add(e.event().worker().dpRank());
    }
    fromZero = false;
    hasLastRank = false;
    lastApplied = -1;
    lastLive = -1;
    lastPayload = null;
  }

  private void apply(long s, byte[] payload) {
    if (s == 0 && lastApplied == -1) {
      fromZero = true;
      hasLastRank = false;
    }
    lastPayload = payload;
    try {
      decodeAndDeliver(s, payload);
    } finally {
      // written last: a reader that sees lastSequence() == s also sees the batch's counters and
      // its events in the sink (the volatile write publishes them)
      lastApplied = s;
    }
  }

  private void decodeAndDeliver(long s, byte[] payload) {
    KvEventBatch batch;
    try {
      batch = KvEventDecoder.decode(payload);
    } catch (KvEventDecodeException e) {
      long n = counters.inc(Counters.C.DECODE_ERRORS);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(name + ": batch " + s + " rejected: " + e.getMessage());
      }
      return;
    }
    counters.inc(Counters.C.BATCHES);
    if (fromZero) {
      int rank = converter.rankOf(batch);
      if (!hasLastRank || rank != lastRank) {
        if (ranksCleared.add(rank)) {
          deliver(converter.clearRank(rank));
        }
        lastRank = rank;
        hasLastRank = true;
      }
    }
    ConvertedBatch c = converter.convert(batch);
    counters.add(Counters.C.SKIPPED, batch.skipped() + c.ignoredEvents());
    counters.add(Counters.C.PARTIAL_BLOCKS, c.droppedBlocks());
    if (c.placeholderEvents() > 0) {
      long n = counters.add(Counters.C.PLACEHOLDER, c.placeholderEvents());
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(
            name
                + ": batch "
                + s
                + " announces offloaded blocks without their token ids, which the router cannot"
                + " hash; left out (with vLLM's OffloadingConnector, set"
                + " kv_connector_extra_config.self_describing_kv_events=true)");
      }
    }
    if (c.refusedEvents() > 0) {
      long n = counters.add(Counters.C.REFUSED, c.refusedEvents());
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(
            name
                + ": batch "
                + s
                + " stores blocks of another size than the registered "
                + spec.blockSize()
                + " tokens; refused");
      }
    }
    if (c.groupProblem() != null) {
      long n = ++groupProblems;
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(name + ": batch " + s + ": " + c.groupProblem());
      }
    }
    if (c.dropped()) {
      long n = counters.inc(Counters.C.SELF_REFERENCING);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.warning(name + ": batch " + s + " dropped: " + c.dropReason());
      }
      return;
    }
    for (TieredEvent e : c.events()) {
      deliver(e);
    }
    for (GroupEvent g : c.groupEvents()) {
      try {
        sink.acceptGroup(g);
      } catch (RuntimeException ex) {
        long n = counters.inc(Counters.C.SINK_ERRORS);
        if (SingleWriterCounters.shouldLog(n)) {
          LOG.log(Level.WARNING, name + ": the sink failed on group event " + g, ex);
        }
      }
    }
    if (batch.ts() > 0) {
      // publish (the engine's wall clock) to applied (ours): vLLM's ts is time.time()
      long lag = Math.round(System.currentTimeMillis() * 1e3 - batch.ts() * 1e6);
      counters.add(Counters.C.LAG_MICROS, Math.max(0, lag));
      counters.inc(Counters.C.LAG_BATCHES);
    }
  }

  private void deliver(TieredEvent e) {
    switch (e.event().data()) {
      case CacheEvent.Stored s -> counters.inc(Counters.C.STORED);
      case CacheEvent.Removed r -> counters.inc(Counters.C.REMOVED);
      case CacheEvent.Cleared c -> counters.inc(Counters.C.CLEARED);
    }
    if (e.tier() != StorageTier.DEVICE) {
      counters.inc(Counters.C.OFF_DEVICE);
    }
    try {
      sink.accept(e.tier(), e.event());
    } catch (RuntimeException ex) {
      long n = counters.inc(Counters.C.SINK_ERRORS);
      if (SingleWriterCounters.shouldLog(n)) {
        LOG.log(Level.WARNING, name + ": the sink failed on " + e.event(), ex);
      }
    }
  }

  private static long nanoTimeNonZero() {
    long t = System.nanoTime();
    return t == 0 ? 1 : t;
  }

  void close() {
    if (replay != null) {
      replay.reset();
    }
  }
}
