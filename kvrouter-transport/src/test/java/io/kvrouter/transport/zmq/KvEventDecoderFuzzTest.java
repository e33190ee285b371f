package io.kvrouter.transport.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.TestBudget;
import io.kvrouter.transport.fuzz.FuzzReport;
import io.kvrouter.transport.fuzz.MsgpackMutator;
import io.kvrouter.transport.fuzz.Vectors;
import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.KvEventDecodeException;
import io.kvrouter.transport.kvevents.KvEventDecoder;
import io.kvrouter.transport.kvevents.VllmEncoder;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

/**
 * Fuzzes the msgpack KV event decoder through the subscriber's own path: seeded mutations of the
 * golden vectors ({@code vectors/kv-events.json}) and of encoder-made batches go to a {@link
 * Source} (decode, count, convert, sink) whose sink applies device events to an index, as {@link
 * IngestSink#deviceIndex} does.
 *
 * <p>For every input: decoding it directly throws nothing but {@link KvEventDecodeException}; the
 * source throws nothing; a rejected input raises {@code decodeErrors} by exactly one and no other
 * event counter, and leaves the index as it was ({@link IndexStats} compared every time: every
 * apply changes a counter in it; {@code dump()} compared every {@code kvrouter.fuzz.dumpEvery}-th
 * reject, default every one); an accepted input raises {@code batches} by exactly one. At the end
 * the totals agree with the counters, and no event made the index throw ({@code sinkErrors} 0).
 *
 * <p>Inputs: {@code -Dkvrouter.fuzz.inputs} (default 20,000; the long run in docs/RELIABILITY.md
 * uses 1,000,000), seed {@code -Dkvrouter.fuzz.seed} (default 9).
 */
class KvEventDecoderFuzzTest {
  private static final int INPUTS = TestBudget.count("kvrouter.fuzz.inputs", 20_000, 1_000_000);
  private static final long SEED = Long.getLong("kvrouter.fuzz.seed", 9L);
  private static final int DUMP_EVERY = Integer.getInteger("kvrouter.fuzz.dumpEvery", 1);

  /** A fresh subscriber path: converter, source, counters and the index its sink feeds. */
  private static final class Path {
    final SingleWriterCounters<Counters.C> counters = Counters.create();
    final KvIndex index = KvIndexes.radixTree();
    // engine blocks of 4 tokens, router blocks of 2: every store also exercises the sub-blocks
    final Source source =
        new Source(
            EngineSpec.of(7, 4),
            new EngineEventConverter(7, 0, 4, BlockHasher.of(2)),
            null,
            counters,
            IngestSink.deviceIndex(index),
            100,
            () -> true);
    long seq;
  }

  @Test
  void mutatedPayloadsAreRejectedCountedAndChangeNothing() {
    // the source logs its first ten rejects per path; a fuzz run would print thousands
    Logger log = Logger.getLogger(ZmqEventSubscriber.class.getName());
    Level level = log.getLevel();
    log.setLevel(Level.OFF);
    try {
      run();
    } finally {
      log.setLevel(level);
    }
  }

  private void run() {
    Random rnd = new Random(SEED);
    MsgpackMutator mutator = new MsgpackMutator(seeds(), rnd);
    FuzzReport report = new FuzzReport("msgpack KV events", SEED);
    Path path = new Path();
    long rejectsSeen = 0;
    for (int i = 0; i < INPUTS; i++) {
      if (i % 5_000 == 0 && i > 0) {
        checkTotals(path, report);
        path = new Path(); // keep the index small; totals are checked per path
      }
      // one input in eight is a seed unchanged, so that the index keeps changing between rejects
      byte[] p = rnd.nextInt(8) == 0 ? mutator.seed() : mutator.next();
      boolean rejected;
      try {
        KvEventDecoder.decode(p);
        rejected = false;
      } catch (KvEventDecodeException e) {
        rejected = true;
      } catch (Throwable t) {
        report.crashed(i, p, "decode threw " + t, t);
        continue;
      }
      IngestStats before = Counters.snapshot(path.counters);
      IndexStats indexBefore = path.index.stats();
      List<RouterEvent> dumpBefore =
          rejected && rejectsSeen++ % DUMP_EVERY == 0 ? path.index.dump() : null;
      try {
        path.source.onLive(path.seq++, p);
      } catch (Throwable t) {
        report.crashed(i, p, "the source threw " + t, t);
        continue;
      }
      IngestStats after = Counters.snapshot(path.counters);
      if (rejected) {
        report.reject();
        if (after.decodeErrors() != before.decodeErrors() + 1
            || after.batches() != before.batches()
            || after.storedEvents() != before.storedEvents()
            || after.removedEvents() != before.removedEvents()
            || after.clearedEvents() != before.clearedEvents()) {
          report.failure(i, p, "counters of a reject: " + before + " -> " + after, null);
        }
        report.indexUnchanged(i, p, path.index, indexBefore, dumpBefore);
      } else {
        if (after.batches() != before.batches() + 1
            || after.decodeErrors() != before.decodeErrors()) {
          report.failure(i, p, "counters of an accepted batch: " + before + " -> " + after, null);
        }
        if (after.selfReferencing() > before.selfReferencing()) {
          report.dropped(); // decoded, then dropped whole by the converter: also changes nothing
          if (!path.index.stats().equals(indexBefore)) {
            report.failure(i, p, "a dropped batch changed the index", null);
          }
        } else {
          report.accept();
        }
      }
    }
    checkTotals(path, report);
    report.finish();
    System.out.println(report.summary());
    assertThat(report.failures()).as(report.summary()).isEmpty();
    assertThat(report.inputs()).isEqualTo(INPUTS);
    // the mutations reach both sides: most inputs are rejected, yet many still decode
    assertThat(report.rejects()).isGreaterThan(INPUTS / 4);
    assertThat(report.accepted()).isGreaterThan(INPUTS / 20);
  }

  /** The counters of one path agree with what the test saw, and the index never threw. */
  private static void checkTotals(Path path, FuzzReport report) {
    IngestStats s = Counters.snapshot(path.counters);
    if (s.sinkErrors() != 0) {
      report.failure(-1, new byte[0], "the index threw on " + s.sinkErrors() + " events", null);
    }
    if (s.batches() + s.decodeErrors() != path.seq || s.messages() != 0 || s.gaps() != 0) {
      report.failure(-1, new byte[0], "totals: " + path.seq + " inputs but " + s, null);
    }
  }

  /** The golden vectors (valid and malformed) plus encoder-made batches in every wire form. */
  static List<byte[]> seeds() {
    List<byte[]> seeds = new ArrayList<>(Vectors.kvEventPayloads());
    Random rnd = new Random(1);
    List<VllmEncoder> encoders = new ArrayList<>();
    for (VllmEncoder.HashStyle h : VllmEncoder.HashStyle.values()) {
      encoders.add(new VllmEncoder(false, false, h, "data_parallel_rank", 2));
      encoders.add(new VllmEncoder(true, true, h, "attn_dp_rank", 3));
      encoders.add(new VllmEncoder(false, true, h, "data_parallel_rank", 4));
    }
    for (VllmEncoder enc : encoders) {
      for (int k = 0; k < 3; k++) {
        List<EngineEvent> events = new ArrayList<>();
        long parent = 0;
        for (int e = 0; e < 1 + rnd.nextInt(4); e++) {
          int blocks = 1 + rnd.nextInt(3);
          long[] hashes = new long[blocks];
          for (int b = 0; b < blocks; b++) hashes[b] = rnd.nextLong();
          int[] tokens = new int[blocks * 4];
          for (int t = 0; t < tokens.length; t++) tokens[t] = rnd.nextInt(50_000);
          events.add(
              switch (rnd.nextInt(4)) {
                case 0 -> EngineEvent.BlockRemoved.of(hashes);
                case 1 -> new EngineEvent.AllBlocksCleared();
                default ->
                    EngineEvent.BlockStored.of(hashes, parent == 0 ? null : parent, tokens, 4);
              });
          parent = hashes[blocks - 1];
        }
        seeds.add(enc.encode(new KvEventBatch(k + 0.5, k == 0 ? null : k, events, 0)));
      }
    }
    return seeds;
  }
}
