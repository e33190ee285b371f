package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * {@code --cached-tenant-prefix}: tenant 0's requests behind a few shared system prompts
 * (TenantRule). Seeded synthetic traces; every expected value is counted from the trace here.
 */
class TenantRulePrefixTest {
  private static final int BLOCKS = 6;
  private static final int PROMPTS = 3;
  // 200 conversations of 3 turns: turn t repeats turn t-1's ids and adds two
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(200, 3, 1000);

  private static TenantRule rule(long seed) {
    return new TenantRule(2, 1, 0.2, false, seed, BLOCKS, PROMPTS, -1);
  }

  private static long[] head(long[] ids, int n) {
    return Arrays.copyOf(ids, n);
  }

  private static int commonPrefix(long[] x, long[] y) {
    int n = 0;
    while (n < x.length && n < y.length && x[n] == y[n]) n++;
    return n;
  }

  @Test
  void everyTenantZeroRequestBeginsWithOneOfTheSharedPromptsAndGrowsByIt() {
    TenantRule.Assignment a = rule(5).assign(TRACE);
    assertThat(a.requests()).hasSize(TRACE.size());
    Set<List<Long>> prompts = new HashSet<>();
    for (int i = 0; i < TRACE.size(); i++) {
      TraceRequest sent = a.requests().get(i);
      TraceRequest orig = TRACE.get(i);
      if (a.tenant()[i] != 0) {
        // the other tenants' requests are sent as in the trace
        assertThat(sent.hashIds()).isEqualTo(orig.hashIds());
        assertThat(sent.inputLength()).isEqualTo(orig.inputLength());
        continue;
      }
      assertThat(sent.hashIds()).hasSize(BLOCKS + orig.hashIds().length);
      assertThat(sent.inputLength())
          .isEqualTo(orig.inputLength() + BLOCKS * TraceRequest.TRACE_BLOCK);
      assertThat(sent.outputLength()).isEqualTo(orig.outputLength());
      assertThat(sent.timestampMs()).isEqualTo(orig.timestampMs());
      List<Long> p = new ArrayList<>();
      for (long h : head(sent.hashIds(), BLOCKS)) p.add(h);
      prompts.add(p);
    }
    // about half the 600 requests are tenant 0's (equal shares by conversation)
    assertThat(a.count(0)).isBetween(200, 400);
    // a few prompts, all of them used by 100-odd conversations
    assertThat(prompts).hasSize(PROMPTS);
    for (List<Long> p : prompts) assertThat(new HashSet<>(p)).hasSize(BLOCKS);
  }

  @Test
  void theSyntheticIdsNeverEqualATraceIdAndNeverAppearOutsideTenantZero() {
    TenantRule.Assignment a = rule(5).assign(TRACE);
    Set<Long> traceIds = new HashSet<>();
    for (TraceRequest r : TRACE) for (long h : r.hashIds()) traceIds.add(h);
    Set<Long> others = new HashSet<>();
    for (int i = 0; i < TRACE.size(); i++) {
      if (a.tenant()[i] != 0) for (long h : a.requests().get(i).hashIds()) others.add(h);
    }
    for (int i = 0; i < TRACE.size(); i++) {
      if (a.tenant()[i] != 0) continue;
      for (long h : a.requests().get(i).hashIds()) {
        assertThat(traceIds).doesNotContain(h);
        assertThat(others).doesNotContain(h);
      }
    }
  }

  @Test
  void theSameRequestBehindTwoPromptsSharesNoBlock() {
    TenantRule r = rule(5);
    TraceRequest req = TRACE.get(450);
    long[] under0 = r.behindPrompt(req, 0).hashIds();
    long[] under1 = r.behindPrompt(req, 1).hashIds();
    Set<Long> s0 = new HashSet<>();
    for (long h : under0) s0.add(h);
    for (long h : under1) assertThat(s0).doesNotContain(h);
    // behind the same prompt it is the same request
    assertThat(r.behindPrompt(req, 1).hashIds()).isEqualTo(under1);
  }

  @Test
  void sharingIsKeptBehindOnePromptAndCutBetweenTwo() {
    // two tenant-0 requests share their prompt and then exactly the trace prefix they shared;
    // behind different prompts they share nothing
    TenantRule.Assignment a = rule(9).assign(TRACE);
    List<Integer> t0 = new ArrayList<>();
    for (int i = 0; i < TRACE.size(); i++) if (a.tenant()[i] == 0) t0.add(i);
    int same = 0;
    int different = 0;
    for (int x = 0; x < t0.size(); x += 7) {
      for (int y = x + 1; y < t0.size(); y += 5) {
        long[] sx = a.requests().get(t0.get(x)).hashIds();
        long[] sy = a.requests().get(t0.get(y)).hashIds();
        int traceShared =
            commonPrefix(TRACE.get(t0.get(x)).hashIds(), TRACE.get(t0.get(y)).hashIds());
        if (Arrays.equals(head(sx, BLOCKS), head(sy, BLOCKS))) {
          assertThat(commonPrefix(sx, sy)).isEqualTo(BLOCKS + traceShared);
          same++;
        } else {
          assertThat(commonPrefix(sx, sy)).isZero();
          different++;
        }
      }
    }
    assertThat(same).isPositive();
    assertThat(different).isPositive();
    // a conversation's turns (request c, c + 200, c + 400) keep one prompt, so a follow-up turn
    // repeats its earlier turn behind it
    for (int c = 0; c < 200; c++) {
      if (a.tenant()[c] != 0) continue;
      long[] first = a.requests().get(c).hashIds();
      long[] third = a.requests().get(c + 400).hashIds();
      assertThat(commonPrefix(first, third)).isEqualTo(first.length);
    }
  }

  @Test
  void theDrawIsSeeded() {
    TenantRule.Assignment a = rule(5).assign(TRACE);
    TenantRule.Assignment again = rule(5).assign(TRACE);
    TenantRule.Assignment other = rule(6).assign(TRACE);
    assertThat(again.tenant()).isEqualTo(a.tenant());
    for (int i = 0; i < TRACE.size(); i++) {
      assertThat(again.requests().get(i).hashIds()).isEqualTo(a.requests().get(i).hashIds());
    }
    boolean differs = !Arrays.equals(other.tenant(), a.tenant());
    for (int i = 0; i < TRACE.size() && !differs; i++) {
      differs = !Arrays.equals(other.requests().get(i).hashIds(), a.requests().get(i).hashIds());
    }
    assertThat(differs).isTrue();
  }

  @Test
  void ownCapsTheRequestsOwnPartBehindThePrompt() {
    TenantRule r = new TenantRule(2, 1, 0, false, 5, BLOCKS, PROMPTS, 2);
    TenantRule.Assignment a = r.assign(TRACE);
    Map<Integer, Integer> seen = new HashMap<>();
    for (int i = 0; i < TRACE.size(); i++) {
      if (a.tenant()[i] != 0) continue;
      TraceRequest orig = TRACE.get(i);
      TraceRequest sent = a.requests().get(i);
      int own = Math.min(orig.inputLength(), 2 * TraceRequest.TRACE_BLOCK);
      assertThat(sent.inputLength()).isEqualTo(BLOCKS * TraceRequest.TRACE_BLOCK + own);
      assertThat(sent.hashIds()).hasSize(BLOCKS + Math.min(2, orig.hashIds().length));
      seen.merge(orig.hashIds().length, 1, Integer::sum);
    }
    // the trace's turns have 3, 5 and 7 blocks: all were cut to 2
    assertThat(seen.keySet()).contains(5, 7);
  }

  @Test
  void ownKeepsAShortRequestWholeAndCutsALongOneAtABlock() {
    // 3 blocks, the last one partial: 512 + 512 + 100 = 1,124 prompt tokens
    TraceRequest req = new TraceRequest(1, 0, 1124, 7, new long[] {10, 11, 12});
    for (int own : new int[] {3, 7, -1}) {
      TraceRequest sent = new TenantRule(2, 1, 0, false, 5, 4, 2, own).behindPrompt(req, 1);
      assertThat(sent.inputLength()).as("OWN " + own).isEqualTo(4 * 512 + 1124);
      assertThat(sent.hashIds()).as("OWN " + own).hasSize(4 + 3);
      assertThat(sent.outputLength()).isEqualTo(7);
    }
    TraceRequest cut = new TenantRule(2, 1, 0, false, 5, 4, 2, 2).behindPrompt(req, 1);
    assertThat(cut.inputLength()).isEqualTo(4 * 512 + 1024);
    assertThat(cut.hashIds()).hasSize(4 + 2);
    TraceRequest none = new TenantRule(2, 1, 0, false, 5, 4, 2, 0).behindPrompt(req, 1);
    assertThat(none.inputLength()).isEqualTo(4 * 512);
    assertThat(none.hashIds()).hasSize(4);
  }

  @Test
  void badPrefixesAreRefused() {
    assertThatThrownBy(() -> new TenantRule(2, 1, 0, true, 1, 4, 4, -1))
        .hasMessageContaining("--cached-tenant-prefix");
    assertThatThrownBy(() -> new TenantRule(4, 10, 0, false, 1, 4, 4, -1))
        .hasMessageContaining("--heavy-tenant-factor");
    assertThatThrownBy(() -> new TenantRule(1, 1, 0, false, 1, 4, 4, -1))
        .hasMessageContaining("--tenants >= 2");
    assertThatThrownBy(() -> new TenantRule(2, 1, 0, false, 1, 4, 0, -1))
        .hasMessageContaining("PROMPTS");
    TraceRequest negative = new TraceRequest(7, 0, 1024, 1, new long[] {3, -2});
    assertThatThrownBy(() -> rule(1).behindPrompt(negative, 0))
        .hasMessageContaining("trace line 7")
        .hasMessageContaining("-2");
  }
}
