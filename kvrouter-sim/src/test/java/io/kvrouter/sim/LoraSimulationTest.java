package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.route.LoraCost;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code simulate --lora-adapters} (docs/SIMULATION.md, "LoRA adapters"). */
class LoraSimulationTest {
  private static final List<TraceRequest> TRACE = SyntheticTrace.conversations(60, 5, 2_000);
  private static final SimConfig FLEET =
      SimConfig.builder().workers(4).gpuBlocks(16384).verifyPrompts(0).build();
  private static final LoraSimulation.Mix MIX =
      new LoraSimulation.Mix(16, 1.0, 2, 100, LoraCost.defaults());

  @Test
  void everyTurnOfAConversationNamesOneAdapterAndPopularityIsSkewed() {
    int[] a = LoraSimulation.assign(TRACE, MIX, 7);
    assertThat(LoraSimulation.assign(TRACE, MIX, 7)).isEqualTo(a);
    Map<Long, Integer> byConversation = new HashMap<>();
    int[] per = new int[MIX.adapters()];
    for (int i = 0; i < a.length; i++) {
      assertThat(a[i]).isBetween(0, MIX.adapters() - 1);
      Integer before = byConversation.putIfAbsent(TRACE.get(i).hashIds()[1], a[i]);
      if (before != null) assertThat(a[i]).as("request %d", i).isEqualTo(before);
      per[a[i]]++;
    }
    assertThat(byConversation).hasSize(60);
    // Zipf s=1 over 16: adapter 0 weighs 1 / H(16) = 29.6 % of conversations, adapter 15 1.8 %
    assertThat(per[0]).isGreaterThan(per[MIX.adapters() - 1]);
  }

  /**
   * 16 adapters on 4 engines of 2 slots: adapter-blind routing spreads each adapter over the fleet
   * and reloads; lora-aware keeps them together. Both runs complete every request.
   */
  @Test
  void loraAwareRoutingLoadsFewerAdapters() {
    LoraSimulation.Comparison c = LoraSimulation.compare("synthetic", TRACE, FLEET, MIX, 1);
    assertThat(c.aware().completed()).isEqualTo(TRACE.size());
    assertThat(c.blind().completed()).isEqualTo(TRACE.size());
    assertThat(c.aware().adapterLoads()).isGreaterThan(0);
    assertThat(c.aware().adapterLoads()).isLessThan(c.blind().adapterLoads());
    // deterministic: the same comparison again gives the same figures
    LoraSimulation.Comparison again = LoraSimulation.compare("synthetic", TRACE, FLEET, MIX, 2);
    assertThat(again.aware().adapterLoads()).isEqualTo(c.aware().adapterLoads());
    assertThat(again.blind().ttftMs()).isEqualTo(c.blind().ttftMs());
  }

  @Test
  void badMixesAreRefused() {
    assertThatThrownBy(() -> new LoraSimulation.Mix(0, 1, 8, 100, LoraCost.defaults()))
        .hasMessageContaining("--lora-adapters must be >= 1");
    assertThatThrownBy(() -> new LoraSimulation.Mix(4, -1, 8, 100, LoraCost.defaults()))
        .hasMessageContaining("--lora-zipf");
    assertThatThrownBy(() -> new LoraSimulation.Mix(4, 1, 0, 100, LoraCost.defaults()))
        .hasMessageContaining("--max-loras must be >= 1");
    assertThatThrownBy(() -> new LoraSimulation.Mix(4, 1, 8, Double.NaN, LoraCost.defaults()))
        .hasMessageContaining("--lora-load-ms");
  }
}
