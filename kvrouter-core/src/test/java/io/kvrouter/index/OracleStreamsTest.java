package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Replays the op streams of {@code oracle/} (copied from the shared oracle) into every index kind
 * and compares each match with the answer NVIDIA Dynamo's indexers gave; and through a {@link
 * TieredIndex} over every kind with the blocks also (or only) on the host tier, where the
 * host-cumulative overlap must be Dynamo's answer too.
 */
class OracleStreamsTest {
  private static final String[] CORPORA = {"corpus-nohole-small", "corpus-nohole-dp2"};
  private static final ObjectMapper JSON = new ObjectMapper();

  @TestFactory
  Stream<DynamicTest> everyKindGivesDynamosAnswers() {
    List<DynamicTest> tests = new ArrayList<>();
    List<Supplier<KvIndex>> kinds = IndexKinds.suppliers();
    for (String corpus : CORPORA) {
      for (int k = 0; k < kinds.size(); k++) {
        Supplier<KvIndex> kind = kinds.get(k);
        tests.add(DynamicTest.dynamicTest(corpus + " kind #" + k, () -> replay(corpus, kind)));
      }
    }
    // with tiers: the same stream through a TieredIndex, its blocks copied to the host tier as
    // well (device answers and the host-cumulative answers must both be Dynamo's), or held on the
    // host tier only (the device holds nothing; the host-cumulative answers are Dynamo's)
    for (String corpus : CORPORA) {
      for (int k = 0; k < kinds.size(); k++) {
        Supplier<KvIndex> kind = kinds.get(k);
        for (Mirror mode : new Mirror[] {Mirror.DEVICE_AND_HOST, Mirror.HOST_ONLY}) {
          tests.add(
              DynamicTest.dynamicTest(
                  corpus + " tiered " + mode + " kind #" + k,
                  () -> replay(corpus, () -> TieredIndex.of(kind), mode)));
        }
      }
    }
    return tests.stream();
  }

  /** Where the stream's blocks go. */
  private enum Mirror {
    DEVICE,
    DEVICE_AND_HOST,
    HOST_ONLY
  }

  private static void replay(String corpus, Supplier<KvIndex> kind) throws IOException {
    replay(corpus, kind, Mirror.DEVICE);
  }

  private static void write(KvIndex index, Mirror mode, RouterEvent e) {
    if (mode != Mirror.HOST_ONLY) index.apply(e);
    if (mode != Mirror.DEVICE) ((TieredIndex) index).apply(Tier.HOST, e);
  }

  private static List<String> lines(String resource) throws IOException {
    try (BufferedReader r =
        new BufferedReader(
            new InputStreamReader(
                OracleStreamsTest.class.getResourceAsStream("/oracle/" + resource),
                StandardCharsets.UTF_8))) {
      return r.lines().toList();
    }
  }

  private static long u64(JsonNode n) {
    return Long.parseUnsignedLong(n.asText());
  }

  private static void replay(String corpus, Supplier<KvIndex> kind, Mirror mode)
      throws IOException {
    List<String> ops = lines(corpus + ".jsonl");
    List<String> answers = lines(corpus + ".radix.out");
    int matches = 0;
    long eventId = 0;
    try (KvIndex index = kind.get()) {
      for (int lineNo = 1; lineNo <= ops.size(); lineNo++) {
        JsonNode op = JSON.readTree(ops.get(lineNo - 1));
        String type = op.get("op").asText();
        Worker w =
            op.has("worker")
                ? new Worker(
                    u64(op.get("worker")), op.has("dp_rank") ? op.get("dp_rank").asInt() : 0)
                : null;
        switch (type) {
          case "store" -> {
            JsonNode blocks = op.get("blocks");
            long[] locals = new long[blocks.size()];
            long[] seqs = new long[blocks.size()];
            for (int i = 0; i < locals.length; i++) {
              locals[i] = u64(blocks.get(i).get(0));
              seqs[i] = u64(blocks.get(i).get(1));
            }
            JsonNode parent = op.get("parent");
            CacheEvent ev =
                parent == null || parent.isNull()
                    ? CacheEvent.storedAtRoot(seqs, locals)
                    : CacheEvent.stored(u64(parent), seqs, locals);
            write(index, mode, new RouterEvent(w, eventId++, ev));
          }
          case "remove" -> {
            JsonNode blocks = op.get("blocks");
            long[] seqs = new long[blocks.size()];
            for (int i = 0; i < seqs.length; i++) seqs[i] = u64(blocks.get(i));
            write(index, mode, new RouterEvent(w, eventId++, CacheEvent.removed(seqs)));
          }
          case "clear" -> index.clearWorker(w.workerId());
          case "remove_worker" -> index.removeWorker(w.workerId());
          case "match" -> {
            JsonNode ls = op.get("locals");
            long[] q = new long[ls.size()];
            for (int i = 0; i < q.length; i++) q[i] = u64(ls.get(i));
            boolean early = op.has("early_exit") && op.get("early_exit").asBoolean();
            index.flush();
            JsonNode answer = JSON.readTree(answers.get(matches));
            assertThat(answer.get("line").asInt()).isEqualTo(lineNo);
            Map<String, Integer> want = new TreeMap<>();
            answer
                .get("scores")
                .properties()
                .forEach(e -> want.put(e.getKey(), e.getValue().asInt()));
            OverlapScores got = index.findMatches(q, early);
            Map<String, Integer> gotByKey = new TreeMap<>();
            for (int i = 0; i < got.size(); i++) {
              gotByKey.put(got.worker(i).toString(), got.scoreAt(i));
            }
            if (mode == Mirror.HOST_ONLY) {
              assertThat(gotByKey)
                  .as("%s line %d: the device holds nothing", corpus, lineNo)
                  .isEmpty();
            } else {
              assertThat(gotByKey).as("%s line %d", corpus, lineNo).isEqualTo(want);
            }
            if (mode != Mirror.DEVICE && !early) {
              TieredIndex t = (TieredIndex) index;
              TieredScores ts = t.hasTiers() ? t.findTiered(q) : null;
              Map<String, Integer> host = new TreeMap<>();
              for (int i = 0; ts != null && i < ts.size(); i++) {
                int b = ts.blocks(i, Tier.HOST);
                if (b > 0) host.put(ts.worker(i).toString(), b);
              }
              assertThat(host).as("%s line %d, device + host", corpus, lineNo).isEqualTo(want);
            }
            matches++;
          }
          default -> throw new IllegalStateException("unknown op " + type + " at line " + lineNo);
        }
      }
      assertThat(matches).isEqualTo(answers.size());
    }
  }
}
