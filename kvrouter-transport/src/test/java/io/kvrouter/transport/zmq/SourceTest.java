package io.kvrouter.transport.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.VllmEncoder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The sequence logic of one engine source, without sockets: live messages in order, gaps, losses,
 * duplicates, restarts, and catch-ups against a scripted replay service (anchor kept, anchor
 * changed, anchor gone, anchor evicted, no answer, a malformed answer).
 */
class SourceTest {
  private final SingleWriterCounters<Counters.C> counters = Counters.create();
  private final List<RouterEvent> sunk = new ArrayList<>();
  private final ScriptedReplay replay = new ScriptedReplay();

  /**
   * Batch {@code seq} of one engine history: it removes the block named {@code 1000 * era + seq}.
   */
  private static byte[] batch(int era, long seq) {
    return VllmEncoder.arrayLike()
        .encode(
            new KvEventBatch(
                seq, null, List.of(EngineEvent.BlockRemoved.of(1000L * era + seq)), 0));
  }

  /** Batch {@code seq} of era 0 published at {@code ts} (seconds, the engine's wall clock). */
  private static byte[] batchAt(long seq, double ts) {
    return VllmEncoder.arrayLike()
        .encode(new KvEventBatch(ts, null, List.of(EngineEvent.BlockRemoved.of(seq)), 0));
  }

  private Source source(boolean withReplay) {
    return new Source(
        EngineSpec.of(7, 4).withTopic("t"),
        new EngineEventConverter(7, 0, 4, BlockHasher.of(4)),
        withReplay ? replay : null,
        counters,
        (tier, e) -> sunk.add(e),
        100,
        () -> true);
  }

  /** The block each sunk event removed, or -1 for a Cleared. */
  private List<Long> applied() {
    List<Long> out = new ArrayList<>();
    for (RouterEvent e : sunk) {
      out.add(e.data() instanceof CacheEvent.Removed r ? r.blockHashes()[0] : -1L);
    }
    return out;
  }

  @Test
  void inOrderMessagesAreApplied() {
    Source s = source(false);
    for (long i = 0; i < 3; i++) s.onLive(i, batch(0, i));
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L);
    assertThat(s.lastApplied()).isEqualTo(2);
    assertThat(Counters.snapshot(counters).batches()).isEqualTo(3);
  }

  @Test
  void eventLagIsPublishToAppliedForBatchesWithATimestamp() {
    Source s = source(false);
    double now = System.currentTimeMillis() / 1e3;
    s.onLive(0, batchAt(0, now - 2.0));
    IngestStats a = Counters.snapshot(counters);
    assertThat(a.lagBatches()).isEqualTo(1);
    assertThat(a.lagMicros()).isGreaterThanOrEqualTo(2_000_000);
    s.onLive(1, batchAt(1, 0)); // no timestamp: not counted
    s.onLive(2, batchAt(2, now + 3600)); // the engine's clock ahead: counted, as 0
    IngestStats b = Counters.snapshot(counters);
    assertThat(b.batches()).isEqualTo(3);
    assertThat(b.lagBatches()).isEqualTo(2);
    assertThat(b.lagMicros()).isEqualTo(a.lagMicros());
  }

  @Test
  void withoutReplayAGapIsCountedLostAndIngestionGoesOn() {
    Source s = source(false);
    s.onLive(0, batch(0, 0));
    s.onLive(3, batch(0, 3));
    assertThat(applied()).containsExactly(-1L, 0L, 3L);
    IngestStats st = Counters.snapshot(counters);
    assertThat(st.gaps()).isEqualTo(1);
    assertThat(st.lostMessages()).isEqualTo(2);
    assertThat(st.replays()).isZero();
  }

  @Test
  void aMalformedPayloadUsesUpItsSequenceNumber() {
    Source s = source(false);
    s.onLive(0, batch(0, 0));
    s.onLive(1, new byte[] {(byte) 0xc1});
    s.onLive(2, batch(0, 2));
    assertThat(applied()).containsExactly(-1L, 0L, 2L);
    assertThat(Counters.snapshot(counters).decodeErrors()).isEqualTo(1);
    assertThat(Counters.snapshot(counters).gaps()).isZero();
  }

  /** A batch of one BlockStored: one 4-token block, hash 77, with these token ids. */
  private static byte[] storeWithTokens(long... tokenIds) {
    try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
      p.packArrayHeader(2).packDouble(1).packArrayHeader(1);
      p.packArrayHeader(5).packString("BlockStored");
      p.packArrayHeader(1).packLong(77).packNil();
      p.packArrayHeader(tokenIds.length);
      for (long t : tokenIds) p.packLong(t);
      p.packInt(4);
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Test
  void aNegativeTokenIdRejectsTheBatchLikeHttpDoes() {
    List<String> logged = new ArrayList<>();
    Logger log = Logger.getLogger(ZmqEventSubscriber.class.getName());
    Handler h =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            logged.add(r.getMessage());
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    log.addHandler(h);
    try {
      Source s = source(false);
      s.onLive(0, batch(0, 0));
      s.onLive(1, storeWithTokens(1, 2, -1, 4));
      s.onLive(2, storeWithTokens(1, 2, 4294967295L, 4)); // the top id is fine: int bits -1
      IngestStats st = Counters.snapshot(counters);
      assertThat(st.decodeErrors()).isEqualTo(1);
      assertThat(st.batches()).isEqualTo(2);
      assertThat(st.storedEvents()).as("only the batch with valid ids").isEqualTo(1);
      assertThat(s.lastApplied()).as("the rejected batch uses up its number").isEqualTo(2);
      assertThat(logged)
          .anySatisfy(
              m ->
                  assertThat(m)
                      .contains("batch 1 rejected")
                      .contains("events[0].token_ids[2]: token id -1 is outside 0..4294967295"));
    } finally {
      log.removeHandler(h);
    }
  }

  @Test
  void aLiveSequenceThatGoesBackIsARestart() {
    Source s = source(false);
    for (long i = 0; i < 4; i++) s.onLive(i, batch(0, i));
    s.onLive(0, batch(1, 0));
    s.onLive(1, batch(1, 1));
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, 3L, -1L, 1000L, 1001L);
    assertThat(Counters.snapshot(counters).restarts()).isEqualTo(1);
    // one as the first history is followed from 0, one for the restart; the second history's 0
    // needs none, the restart cleared that rank already
    assertThat(Counters.snapshot(counters).clearedEvents()).isEqualTo(2);
  }

  @Test
  void aGapIsFilledFromTheReplayAfterTheAnchorChecksOut() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    // an engine buffers what it has sent before it answers a replay, so 3 is there too
    replay.script(0, batch(0, 0), 1, batch(0, 1), 2, batch(0, 2), 3, batch(0, 3));
    s.onLive(3, batch(0, 3));
    assertThat(replay.requests).containsExactly(0L);
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, 3L);
    IngestStats st = Counters.snapshot(counters);
    assertThat(st.replayedMessages()).isEqualTo(3);
    assertThat(st.lostMessages()).isZero();
    assertThat(st.restarts()).isZero();
  }

  @Test
  void aLiveMessageTheEnginesReplayDoesNotHoldIsSkippedAsStale() {
    Source s = source(true);
    for (long i = 0; i < 3; i++) s.onLive(i, batch(1, i));
    // 9 of an earlier engine life, held up on the way; the engine's history ends at 2
    replay.script(2, batch(1, 2));
    s.onLive(9, batch(0, 9));
    assertThat(applied()).containsExactly(-1L, 1000L, 1001L, 1002L);
    assertThat(s.lastApplied()).isEqualTo(2);
    IngestStats st = Counters.snapshot(counters);
    assertThat(st.duplicates()).isEqualTo(1);
    assertThat(st.lostMessages()).isZero();
    assertThat(st.restarts()).isZero();
    assertThat(s.resyncAt).as("asks again soon").isNotZero();
    s.onLive(3, batch(1, 3)); // the history goes on
    assertThat(applied()).endsWith(1003L);
  }

  @Test
  void aRepeatOfTheLastBatchIsADuplicateNotARestart() {
    Source s = source(false);
    for (long i = 0; i < 3; i++) s.onLive(i, batch(0, i));
    s.onLive(2, batch(0, 2));
    s.onLive(3, batch(0, 3));
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, 3L);
    assertThat(Counters.snapshot(counters).duplicates()).isEqualTo(1);
    assertThat(Counters.snapshot(counters).restarts()).isZero();
  }

  @Test
  void aLateMessageWhoseAnchorStillHoldsIsNotARestart() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    replay.script(0, batch(0, 0), 1, batch(0, 1), 2, batch(0, 2));
    s.onLive(2, batch(0, 2)); // 1 is late: replay brings it
    replay.script(2, batch(0, 2));
    s.onLive(1, batch(0, 1)); // and here it is
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L);
    assertThat(Counters.snapshot(counters).restarts()).isZero();
    assertThat(Counters.snapshot(counters).duplicates()).isEqualTo(2);
  }

  @Test
  void aReplayThatAlsoHoldsTheLiveMessageMakesItADuplicate() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    replay.script(0, batch(0, 0), 1, batch(0, 1), 2, batch(0, 2), 3, batch(0, 3));
    s.onLive(2, batch(0, 2));
    s.onLive(3, batch(0, 3));
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, 3L);
    assertThat(Counters.snapshot(counters).duplicates()).isEqualTo(2);
  }

  @Test
  void aJumpInsideAReplayAnswerIsAskedForAgainNotLost() {
    Source s = source(true);
    for (long i = 0; i < 2; i++) s.onLive(i, batch(0, i));
    // the engine's ROUTER dropped 3 and 4 on the way (its send queue was full)
    replay.script(1, batch(0, 1), 2, batch(0, 2), 5, batch(0, 5));
    replay.script(2, batch(0, 2), 3, batch(0, 3), 4, batch(0, 4), 5, batch(0, 5));
    s.onLive(5, batch(0, 5));
    assertThat(replay.requests).containsExactly(1L, 2L);
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, 3L, 4L, 5L);
    IngestStats st = Counters.snapshot(counters);
    assertThat(st.lostMessages()).isZero();
    assertThat(st.replayFailures()).isZero();
    assertThat(st.restarts()).isZero();
  }

  @Test
  void aReplayAnswerWhoseTailNeverComesIsAskedForAgain() {
    Source s = source(true);
    for (long i = 0; i < 2; i++) s.onLive(i, batch(0, i));
    replay.scriptWithoutEnd(1, batch(0, 1), 2, batch(0, 2));
    replay.script(2, batch(0, 2), 3, batch(0, 3), 4, batch(0, 4));
    s.onLive(4, batch(0, 4));
    assertThat(replay.requests).containsExactly(1L, 2L);
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, 3L, 4L);
    assertThat(Counters.snapshot(counters).lostMessages()).isZero();
    assertThat(Counters.snapshot(counters).replayFailures()).isZero();
  }

  @Test
  void aLateJoinerReplaysFromZeroWithoutAnAnchor() {
    Source s = source(true);
    replay.script(0, batch(0, 0), 1, batch(0, 1), 2, batch(0, 2));
    s.onLive(2, batch(0, 2));
    assertThat(replay.requests).containsExactly(0L);
    // following the history from 0, the rank is cleared first: an index warm-started from a
    // peer may hold blocks of an earlier life of this engine
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L);
    assertThat(Counters.snapshot(counters).duplicates()).isEqualTo(1);
  }

  @Test
  void aDifferentAnchorMeansTheEngineRestartedWhileWeWereAway() {
    Source s = source(true);
    for (long i = 0; i < 3; i++) s.onLive(i, batch(0, i));
    // the new engine has published 0..4 by now; we see 4 live
    replay.script(2, batch(1, 2), 3, batch(1, 3), 4, batch(1, 4));
    replay.script(0, batch(1, 0), 1, batch(1, 1), 2, batch(1, 2), 3, batch(1, 3), 4, batch(1, 4));
    s.onLive(4, batch(1, 4));
    assertThat(replay.requests).containsExactly(2L, 0L);
    assertThat(replay.resets)
        .as("the rest of the first answer is dropped")
        .isGreaterThanOrEqualTo(1);
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, -1L, 1000L, 1001L, 1002L, 1003L, 1004L);
    assertThat(Counters.snapshot(counters).restarts()).isEqualTo(1);
  }

  @Test
  void aReplayWithNothingFromTheAnchorOnMeansARestartedEngine() {
    Source s = source(true);
    for (long i = 0; i < 3; i++) s.onLive(i, batch(0, i));
    replay.script(); // the restarted engine has published nothing yet
    replay.script();
    s.catchUp(); // as after a reconnection
    assertThat(replay.requests).containsExactly(2L, 0L);
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L, -1L);
    assertThat(s.lastApplied()).isEqualTo(-1);
    assertThat(Counters.snapshot(counters).restarts()).isEqualTo(1);
  }

  @Test
  void anUpToDateCatchUpChangesNothing() {
    Source s = source(true);
    for (long i = 0; i < 3; i++) s.onLive(i, batch(0, i));
    replay.script(2, batch(0, 2));
    s.catchUp();
    assertThat(applied()).containsExactly(-1L, 0L, 1L, 2L);
    assertThat(Counters.snapshot(counters).restarts()).isZero();
    assertThat(Counters.snapshot(counters).replayedMessages()).isZero();
  }

  @Test
  void anAnchorEvictedFromTheBufferLosesWhatIsMissing() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    replay.script(3, batch(0, 3), 4, batch(0, 4));
    s.onLive(4, batch(0, 4));
    assertThat(applied()).containsExactly(-1L, 0L, 3L, 4L);
    assertThat(Counters.snapshot(counters).lostMessages()).isEqualTo(2);
    assertThat(Counters.snapshot(counters).restarts()).isZero();
  }

  @Test
  void aReplayWithoutAnswerIsAbandonedAndTheGapLost() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    replay.silent = true;
    s.onLive(3, batch(0, 3));
    assertThat(applied()).containsExactly(-1L, 0L, 3L);
    IngestStats st = Counters.snapshot(counters);
    assertThat(st.replayFailures()).isEqualTo(1);
    assertThat(st.lostMessages()).isEqualTo(2);
    assertThat(replay.resets).isEqualTo(1);
  }

  @Test
  void aMalformedReplyAbandonsTheReplay() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    replay.answers.add(new Replay.Reply(0, null, "the sequence frame has 3 bytes, expected 8"));
    s.onLive(2, batch(0, 2));
    assertThat(Counters.snapshot(counters).replayFailures()).isEqualTo(1);
    assertThat(Counters.snapshot(counters).lostMessages()).isEqualTo(1);
  }

  @Test
  void aReplayThatThrowsIsAbandonedAndTheLiveStreamGoesOn() {
    Source s = source(true);
    s.onLive(0, batch(0, 0));
    replay.broken = true;
    s.onLive(2, batch(0, 2));
    s.onLive(3, batch(0, 3));
    assertThat(applied()).containsExactly(-1L, 0L, 2L, 3L);
    assertThat(Counters.snapshot(counters).replayFailures()).isEqualTo(1);
    assertThat(Counters.snapshot(counters).lostMessages()).isEqualTo(1);
    assertThat(replay.resets).isEqualTo(1);
  }

  @Test
  void replyFramesAreReadWithOrWithoutDelimiterAndTopic() {
    byte[] seq = {0, 0, 0, 0, 0, 0, 0, 9};
    byte[] end = {-1, -1, -1, -1, -1, -1, -1, -1};
    byte[] p = {1, 2};
    byte[] empty = {};
    byte[] topic = {'t'};
    assertThat(ReplayClient.parse(List.of(empty, seq, p)).seq()).isEqualTo(9);
    assertThat(ReplayClient.parse(List.of(seq, p)).payload()).isEqualTo(p);
    assertThat(ReplayClient.parse(List.of(empty, topic, seq, p)).seq()).isEqualTo(9);
    assertThat(ReplayClient.parse(List.of(topic, seq, p)).seq()).isEqualTo(9);
    assertThat(ReplayClient.parse(List.of(empty, end, empty)).isEnd()).isTrue();
    assertThat(ReplayClient.parse(List.of(empty, topic, end, empty)).isEnd()).isTrue();
    assertThat(ReplayClient.parse(List.of(seq)).problem()).contains("got 1 frames");
    assertThat(ReplayClient.parse(List.of(empty, new byte[3], p)).problem())
        .contains("3 bytes, expected 8");
    assertThat(
            ReplayClient.parse(List.of(empty, new byte[] {-1, 0, 0, 0, 0, 0, 0, 0}, p)).problem())
        .contains("negative sequence number");
  }

  /** A replay service that answers each request with the next scripted list, then END. */
  private static final class ScriptedReplay implements Replay {
    final List<Long> requests = new ArrayList<>();
    final Deque<List<Reply>> scripts = new ArrayDeque<>();
    final Deque<Reply> answers = new ArrayDeque<>();
    boolean silent;
    boolean broken;
    int resets;

    /** Scripts the answer to one request: pairs of (seq, payload), then END. */
    void script(Object... seqAndPayload) {
      scriptAnswer(true, seqAndPayload);
    }

    /** Scripts an answer whose end marker never comes (then: silence, as a timeout). */
    void scriptWithoutEnd(Object... seqAndPayload) {
      scriptAnswer(false, seqAndPayload);
    }

    private void scriptAnswer(boolean withEnd, Object... seqAndPayload) {
      List<Reply> r = new ArrayList<>();
      for (int i = 0; i < seqAndPayload.length; i += 2) {
        r.add(
            new Reply(
                ((Number) seqAndPayload[i]).longValue(), (byte[]) seqAndPayload[i + 1], null));
      }
      if (withEnd) r.add(Reply.END);
      scripts.addLast(r);
    }

    @Override
    public String endpoint() {
      return "scripted";
    }

    @Override
    public boolean request(long start) {
      requests.add(start);
      if (broken) throw new IllegalStateException("no such endpoint");
      if (answers.isEmpty() && !scripts.isEmpty()) answers.addAll(scripts.pollFirst());
      return true;
    }

    @Override
    public Reply next(long timeoutMs, BooleanSupplier running) {
      return silent ? null : answers.pollFirst();
    }

    @Override
    public void reset() {
      resets++;
      answers.clear();
    }
  }
}
