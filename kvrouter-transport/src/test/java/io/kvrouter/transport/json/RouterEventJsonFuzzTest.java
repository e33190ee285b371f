package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.TestBudget;
import io.kvrouter.transport.fuzz.FuzzReport;
import io.kvrouter.transport.fuzz.JsonMutator;
import io.kvrouter.transport.fuzz.Vectors;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import io.kvrouter.transport.kvevents.KvEventDecodeException;
import io.kvrouter.transport.kvevents.KvEventDecoder;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Fuzzes the Dynamo JSON RouterEvent codec the way its consumers use it: one event per message (the
 * NATS replica: decode, count a malformed message, else apply) and one array per document (NATS
 * snapshots and {@code POST /events}: decode whole, then apply all). Seeds are the golden msgpack
 * vectors ({@code vectors/kv-events.json}) converted to router events and written as Dynamo JSON,
 * plus hand-written documents in every accepted form.
 *
 * <p>For every input: nothing but {@link EventDecodeException} comes out of the codec; applying
 * what it accepted never makes the index throw; the test's malformed counter rises by exactly the
 * number of rejects; a rejected input leaves the index as it was ({@link IndexStats} every time,
 * {@code dump()} every {@code kvrouter.fuzz.dumpEvery}-th reject, default every one). Inputs:
 * {@code -Dkvrouter.fuzz.inputs} (default 20,000), seed {@code -Dkvrouter.fuzz.seed} (default 9).
 */
class RouterEventJsonFuzzTest {
  private static final int INPUTS = TestBudget.count("kvrouter.fuzz.inputs", 20_000, 1_000_000);
  private static final long SEED = Long.getLong("kvrouter.fuzz.seed", 9L);
  private static final int DUMP_EVERY = Integer.getInteger("kvrouter.fuzz.dumpEvery", 1);

  /** The consumer side: an index and the counters a consumer keeps. */
  private static final class Consumer {
    final KvIndex index = KvIndexes.radixTree();
    long malformed;
    long applyErrors;

    /** Decodes and applies one input as a consumer does; returns whether it was rejected. */
    boolean consume(byte[] input, boolean array) {
      List<RouterEvent> events;
      try {
        events =
            array ? RouterEventJson.readEvents(input) : List.of(RouterEventJson.readEvent(input));
      } catch (EventDecodeException e) {
        malformed++;
        return true;
      }
      for (RouterEvent e : events) {
        try {
          index.apply(e);
        } catch (RuntimeException x) {
          applyErrors++;
        }
      }
      return false;
    }
  }

  @Test
  void mutatedDocumentsAreRejectedCountedAndChangeNothing() {
    Random rnd = new Random(SEED);
    JsonMutator mutator = new JsonMutator(seeds(), rnd);
    FuzzReport report = new FuzzReport("Dynamo JSON RouterEvent", SEED);
    Consumer consumer = new Consumer();
    long rejectsSeen = 0;
    long rejectsBefore = 0;
    for (int i = 0; i < INPUTS; i++) {
      if (i % 5_000 == 0 && i > 0) {
        check(consumer, report, rejectsBefore);
        rejectsBefore = report.rejects();
        consumer = new Consumer();
      }
      byte[] input =
          rnd.nextInt(8) == 0 ? mutator.seed().getBytes(StandardCharsets.UTF_8) : mutator.next();
      // a document that is one array goes the array way, anything else the single-event way;
      // one time in eight the other way, which must reject it
      boolean array = startsWithBracket(input) != (rnd.nextInt(8) == 0);
      IndexStats before = consumer.index.stats();
      List<RouterEvent> dumpBefore =
          rejectsSeen % DUMP_EVERY == 0 ? consumer.index.dump() : null; // compared on a reject
      long malformedBefore = consumer.malformed;
      boolean rejected;
      try {
        rejected = consumer.consume(input, array);
      } catch (Throwable t) {
        report.crashed(i, input, "the codec threw " + t, t);
        continue;
      }
      if (rejected) {
        report.reject();
        rejectsSeen++;
        if (consumer.malformed != malformedBefore + 1) {
          report.failure(i, input, "a reject was not counted once", null);
        }
        report.indexUnchanged(i, input, consumer.index, before, dumpBefore);
      } else {
        report.accept();
      }
    }
    check(consumer, report, rejectsBefore);
    report.finish();
    System.out.println(report.summary());
    assertThat(report.failures()).as(report.summary()).isEmpty();
    assertThat(report.inputs()).isEqualTo(INPUTS);
    assertThat(report.rejects()).isGreaterThan(INPUTS / 4);
    assertThat(report.accepted()).isGreaterThan(INPUTS / 20);
  }

  private static void check(Consumer c, FuzzReport report, long rejectsBefore) {
    if (c.applyErrors != 0) {
      report.failure(-1, new byte[0], "the index threw on " + c.applyErrors + " events", null);
    }
    if (c.malformed != report.rejects() - rejectsBefore) {
      report.failure(
          -1,
          new byte[0],
          "counted " + c.malformed + " malformed, saw " + (report.rejects() - rejectsBefore),
          null);
    }
  }

  private static boolean startsWithBracket(byte[] b) {
    for (byte c : b) {
      if (c == '[') return true;
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
    }
    return false;
  }

  /**
   * The golden msgpack vectors converted to router events (as the ZMQ path would), one document per
   * event and one array per batch, plus hand-written documents in every form the codec reads.
   */
  static List<String> seeds() {
    List<String> seeds = new ArrayList<>();
    EngineEventConverter converter = new EngineEventConverter(3, 0, 4, BlockHasher.of(2));
    for (byte[] p : Vectors.kvEventPayloads()) {
      try {
        List<RouterEvent> events = new ArrayList<>();
        for (TieredEvent t : converter.convert(KvEventDecoder.decode(p)).events()) {
          events.add(t.event());
          seeds.add(RouterEventJson.writeEvent(t.event()));
        }
        seeds.add(RouterEventJson.writeEvents(events));
      } catch (KvEventDecodeException e) {
        // a malformed vector: nothing to convert
      }
    }
    long[] local = BlockHasher.of(4).localHashes(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    long[] seq = SequenceHasher.sequenceHashes(local);
    List<RouterEvent> chain =
        List.of(
            new RouterEvent(new Worker(1, 0), 1, CacheEvent.storedAtRoot(seq, local)),
            new RouterEvent(
                new Worker(-1L, 2),
                -2L,
                CacheEvent.stored(seq[0], new long[] {-5L, 77}, new long[] {Long.MIN_VALUE, 3})),
            new RouterEvent(new Worker(1, 0), 3, CacheEvent.removed(new long[] {seq[2], 9})),
            new RouterEvent(new Worker(2, 1), 4, CacheEvent.cleared()));
    for (RouterEvent e : chain) seeds.add(RouterEventJson.writeEvent(e));
    seeds.add(RouterEventJson.writeEvents(chain));
    seeds.add("[]");
    seeds.add("{\"worker_id\":5,\"event\":{\"event_id\":1,\"data\":\"cleared\"}}");
    seeds.add(
        "{\"worker_id\":5,\"dp_rank\":3,\"event\":{\"event_id\":1,\"data\":{\"cleared\":null}}}");
    seeds.add(
        "{\"worker_id\":18446744073709551615,\"event\":{\"event_id\":7,\"data\":{\"stored\":"
            + "{\"blocks\":[{\"block_hash\":-1,\"tokens_hash\":18446744073709551615,"
            + "\"mm_extra_info\":{\"mm_objects\":[{\"mm_hash\":1,\"offsets\":[[0,4]]}]}}]}},"
            + "\"dp_rank\":0},\"extra\":[1,{\"a\":[null,true]}]}");
    seeds.add(
        "{\"event\":{\"data\":{\"removed\":{\"block_hashes\":[1,2,3]}},\"event_id\":9},"
            + "\"worker_id\":0}");
    return seeds;
  }
}
