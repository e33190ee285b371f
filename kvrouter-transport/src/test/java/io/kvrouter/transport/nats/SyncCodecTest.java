package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import io.kvrouter.route.SequenceChange;
import io.kvrouter.route.SequenceChange.Corrected;
import io.kvrouter.route.SequenceChange.Predicted;
import io.kvrouter.route.SequenceChange.PrefillCompleted;
import io.kvrouter.route.SequenceChange.Released;
import io.kvrouter.route.SequenceChange.Routed;
import io.kvrouter.route.SequenceSync.Capacity;
import io.kvrouter.transport.nats.SyncCodec.FormatException;
import io.kvrouter.transport.nats.SyncCodec.Message;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The sequence sync wire format: round trips, reserved record types, corrupt input. */
class SyncCodecTest {
  static final Routed ROUTED =
      new Routed(
          "req-é-1",
          new Worker(-7L, 3), // a worker id above 2^63 as unsigned
          new long[] {1L, -2L, Long.MAX_VALUE, Long.MIN_VALUE},
          300);

  @Test
  void aBatchRoundTrips() throws Exception {
    List<SequenceChange> in =
        List.of(
            ROUTED,
            new PrefillCompleted("req-é-1"),
            new Released("a", false),
            new Released("b", true),
            new Routed("empty", new Worker(1, 0), new long[0], 0));
    byte[] wire = SyncCodec.batch("gw-1", 42L, 17L, 123456789L, in);
    Message m = SyncCodec.decode(wire);
    assertThat(m.kind()).isEqualTo(SyncCodec.KIND_BATCH);
    assertThat(m.replicaId()).isEqualTo("gw-1");
    assertThat(m.incarnation()).isEqualTo(42L);
    assertThat(m.sequence()).isEqualTo(17L);
    assertThat(m.sentAtMillis()).isEqualTo(123456789L);
    assertThat(m.changes()).hasSize(5);
    Routed r = (Routed) m.changes().get(0);
    assertThat(r.requestId()).isEqualTo("req-é-1");
    assertThat(r.worker()).isEqualTo(new Worker(-7L, 3));
    assertThat(r.seqHashes()).containsExactly(1L, -2L, Long.MAX_VALUE, Long.MIN_VALUE);
    assertThat(r.prefillTokens()).isEqualTo(300);
    assertThat(m.changes().subList(1, 4))
        .containsExactly(
            new PrefillCompleted("req-é-1"), new Released("a", false), new Released("b", true));
    assertThat(((Routed) m.changes().get(4)).seqHashes()).isEmpty();
    // 8 bytes a hash: the routed record is its id, worker, rank, prefill and 4 × 8 bytes
    assertThat(SyncCodec.recordSize(ROUTED)).isEqualTo(1 + 1 + (1 + 8) + 8 + 1 + 2 + 1 + 32);
  }

  @Test
  void snapshotChunksAndGoodbyesRoundTrip() throws Exception {
    Message c =
        SyncCodec.decode(
            SyncCodec.snapshotChunk("r", 5, 99, 0, List.of(), 1, 2, 3, List.of(ROUTED)));
    assertThat(c.kind()).isEqualTo(SyncCodec.KIND_SNAPSHOT);
    assertThat(c.sequence()).isEqualTo(99);
    assertThat(c.chunk()).isEqualTo(2);
    assertThat(c.chunks()).isEqualTo(3);
    assertThat(c.changes()).hasSize(1);
    Message bye = SyncCodec.decode(SyncCodec.bye("r", 5, 100, 1));
    assertThat(bye.kind()).isEqualTo(SyncCodec.KIND_BYE);
    assertThat(bye.changes()).isEmpty();
  }

  @Test
  void predictionsCorrectionsAndAModelSnapshotRoundTrip() throws Exception {
    Predicted p = new Predicted(1L << 40, new Worker(-3L, 2), new long[] {5L, -6L, 7L}, 0);
    Corrected x = new Corrected(7, new Worker(9, 0), new long[] {Long.MIN_VALUE, 11L}, 5, 2);
    Corrected none = new Corrected(8, new Worker(9, 0), new long[0], 3, 0);
    List<SequenceChange> in = List.of(ROUTED, p, new Released("a", false), x, none);
    Message m = SyncCodec.decode(SyncCodec.batch("gw-2", 3L, 40L, 5L, in));
    assertThat(m.sequence()).isEqualTo(40L);
    assertThat(m.changes()).hasSize(5);
    Predicted p2 = (Predicted) m.changes().get(1);
    assertThat(p2.number()).isEqualTo(1L << 40);
    assertThat(p2.worker()).isEqualTo(new Worker(-3L, 2));
    assertThat(p2.localHashes()).containsExactly(5L, -6L, 7L);
    assertThat(p2.ageMillis()).isZero();
    assertThat(m.changes().get(2)).isEqualTo(new Released("a", false));
    Corrected x2 = (Corrected) m.changes().get(3);
    assertThat(x2.number()).isEqualTo(7);
    assertThat(x2.worker()).isEqualTo(new Worker(9, 0));
    assertThat(x2.localHashes()).containsExactly(Long.MIN_VALUE, 11L);
    assertThat(x2.predictedBlocks()).isEqualTo(5);
    assertThat(x2.cachedBlocks()).isEqualTo(2);
    Corrected none2 = (Corrected) m.changes().get(4);
    assertThat(none2.localHashes()).isEmpty();
    assertThat(none2.predictedBlocks()).isEqualTo(3);
    // a prediction record: number, worker, rank, age, count, 3 × 8 bytes
    assertThat(SyncCodec.recordSize(p)).isEqualTo(1 + 1 + (6 + 8 + 1 + 1 + 1 + 24));

    Predicted old = new Predicted(0, new Worker(1, 0), new long[] {1L, 2L}, 123_456L);
    List<Capacity> caps =
        List.of(new Capacity(new Worker(1, 0), 77), new Capacity(new Worker(2, 1), Long.MAX_VALUE));
    Message c =
        SyncCodec.decode(
            SyncCodec.snapshotChunk("r", 5, 99, 1234, caps, 1, 0, 2, List.of(ROUTED, old)));
    assertThat(c.upToPrediction()).isEqualTo(1234);
    assertThat(c.capacities()).containsExactlyElementsOf(caps);
    assertThat(c.changes()).hasSize(2);
    Predicted old2 = (Predicted) c.changes().get(1);
    assertThat(old2.ageMillis()).isEqualTo(123_456L);
    assertThat(old2.localHashes()).containsExactly(1L, 2L);
    // a batch carries neither: they read as 0 and empty
    assertThat(m.upToPrediction()).isZero();
    assertThat(m.capacities()).isEmpty();
  }

  /** A peer's counts that would size memory or loads on the receiver are bounded. */
  @Test
  void countsPastTheirBoundsAreFormatExceptions() {
    byte[] many =
        SyncCodec.snapshotChunk(
            "r", 5, 99, 0, List.of(), 1, 0, SyncCodec.MAX_CHUNKS + 1, List.of(ROUTED));
    assertThatThrownBy(() -> SyncCodec.decode(many))
        .isInstanceOf(SyncCodec.FormatException.class)
        .hasMessageContaining("too large");
    byte[] hugePrefill =
        SyncCodec.batch(
            "r",
            1,
            1,
            0,
            List.of(new Routed("x", new Worker(1, 0), new long[] {1}, 1L + Integer.MAX_VALUE)));
    assertThatThrownBy(() -> SyncCodec.decode(hugePrefill))
        .isInstanceOf(SyncCodec.FormatException.class)
        .hasMessageContaining("too large");
  }

  @Test
  void aRecordOfAnUnknownTypeIsSkippedByItsLength() throws Exception {
    byte[] one = SyncCodec.batch("r", 1, 1, 0, List.of(new Released("x", false)));
    // the same message with a record of a type this build does not know, of 3 bytes, before it
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    int countAt = one.length - (SyncCodec.recordSize(new Released("x", false))) - 1;
    b.write(one, 0, countAt);
    b.write(2); // two records
    b.write(new byte[] {42, 3, 9, 9, 9});
    b.write(one, countAt + 1, one.length - countAt - 1);
    Message m = SyncCodec.decode(b.toByteArray());
    assertThat(m.changes()).containsExactly(new Released("x", false));
  }

  @Test
  void corruptOrCutMessagesAreFormatExceptions() throws Exception {
    byte[] wire =
        SyncCodec.batch(
            "gw-1",
            42L,
            17L,
            1L,
            List.of(
                ROUTED,
                new Released("a", true),
                new Predicted(3, new Worker(1, 0), new long[] {4L, 5L}, 0),
                new Corrected(4, new Worker(1, 0), new long[] {4L}, 2, 1)));
    for (int cut = 0; cut < wire.length; cut++) {
      byte[] part = Arrays.copyOf(wire, cut);
      assertThatThrownBy(() -> SyncCodec.decode(part))
          .as("cut at %d", cut)
          .isInstanceOf(FormatException.class);
    }
    assertThatThrownBy(() -> SyncCodec.decode("{\"json\":1}".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(FormatException.class);
    long seed = System.nanoTime();
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int i = 0; i < 2000; i++) {
      byte[] x = wire.clone();
      x[4 + rnd.nextInt(x.length - 4)] = (byte) rnd.nextInt(256);
      try {
        SyncCodec.decode(x); // may still decode: then it must not have thrown anything else
      } catch (FormatException expected) {
        // fine
      } catch (RuntimeException e) {
        throw new AssertionError("seed " + seed + ": " + e, e);
      }
    }
  }
}
