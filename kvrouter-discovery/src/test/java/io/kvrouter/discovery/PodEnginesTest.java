package io.kvrouter.discovery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.kvrouter.route.EngineRole;
import io.kvrouter.transport.kvevents.ClearScope;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The annotation schema: what a pod says, turned into engines or a reason to skip it. */
class PodEnginesTest {
  private static final DiscoveryConfig CONFIG =
      DiscoveryConfig.labelSelector("test", "app=vllm").withDefaults("dflt", 16, EngineRole.BOTH);

  private static Pod pod(Map<String, String> annotations, Integer events, Integer replay) {
    return Pods.pod("p", Map.of("app", "vllm"), "10.1.2.3", true, annotations, events, replay);
  }

  private static String invalid(Map<String, String> annotations, Integer events, Integer replay) {
    PodEngines.Result r = PodEngines.of(pod(annotations, events, replay), CONFIG, null);
    assertThat(r.engines()).isNull();
    return r.invalid();
  }

  @Test
  void defaultsFillWhatIsNotAnnotated() {
    List<DiscoveredEngine> e = PodEngines.of(pod(Map.of(), null, null), CONFIG, null).engines();
    assertThat(e).hasSize(1);
    assertThat(e.get(0).model()).isEqualTo("dflt");
    assertThat(e.get(0).blockSize()).isEqualTo(16);
    assertThat(e.get(0).role()).isEqualTo(EngineRole.BOTH);
    assertThat(e.get(0).clearScope()).isEqualTo(ClearScope.DEVICE);
    assertThat(e.get(0).eventsEndpoint()).isNull();
    assertThat(e.get(0).topic()).isNull();
    assertThat(e.get(0).id()).isEqualTo("test/p/0");
  }

  @Test
  void everyAnnotationIsRead() {
    Map<String, String> a = new HashMap<>();
    a.put("kvrouter.io/model", "llama");
    a.put("kvrouter.io/block-size", "64");
    a.put("kvrouter.io/role", "prefill");
    a.put("kvrouter.io/dp-ranks", "2,4-5");
    a.put("kvrouter.io/topic", "kv@llama");
    a.put("kvrouter.io/all-blocks-cleared", "all_tiers");
    a.put("other.io/ignored", "x");
    List<DiscoveredEngine> e = PodEngines.of(pod(a, 5557, 6000), CONFIG, null).engines();
    assertThat(e).extracting(DiscoveredEngine::dpRank).containsExactly(2, 4, 5);
    assertThat(e)
        .extracting(DiscoveredEngine::eventsEndpoint)
        .containsExactly("tcp://10.1.2.3:5559", "tcp://10.1.2.3:5561", "tcp://10.1.2.3:5562");
    assertThat(e)
        .extracting(DiscoveredEngine::replayEndpoint)
        .containsExactly("tcp://10.1.2.3:6002", "tcp://10.1.2.3:6004", "tcp://10.1.2.3:6005");
    assertThat(e).extracting(DiscoveredEngine::baseUrl).containsOnly("http://10.1.2.3:8000");
    assertThat(e).extracting(DiscoveredEngine::model).containsOnly("llama");
    assertThat(e).extracting(DiscoveredEngine::blockSize).containsOnly(64);
    assertThat(e).extracting(DiscoveredEngine::role).containsOnly(EngineRole.PREFILL);
    assertThat(e).extracting(DiscoveredEngine::topic).containsOnly("kv@llama");
    assertThat(e).extracting(DiscoveredEngine::clearScope).containsOnly(ClearScope.ALL_TIERS);
    assertThat(e).extracting(DiscoveredEngine::instanceId).containsOnly(e.get(0).instanceId());
  }

  @Test
  void invalidAnnotationsAndPortsAreRefusedWithTheirReason() {
    assertThat(invalid(Map.of("kvrouter.io/modle", "x"), null, null))
        .isEqualTo(
            "unknown annotation kvrouter.io/modle (known: kvrouter.io/all-blocks-cleared,"
                + " kvrouter.io/block-size, kvrouter.io/dp-ranks, kvrouter.io/model,"
                + " kvrouter.io/role, kvrouter.io/topic)");
    assertThat(invalid(Map.of("kvrouter.io/model", " "), null, null))
        .isEqualTo("kvrouter.io/model is empty");
    assertThat(invalid(Map.of("kvrouter.io/block-size", "0"), null, null))
        .isEqualTo("kvrouter.io/block-size must be 1..1048576, got '0'");
    assertThat(invalid(Map.of("kvrouter.io/block-size", "16k"), null, null))
        .isEqualTo("kvrouter.io/block-size must be a number, got '16k'");
    assertThat(invalid(Map.of("kvrouter.io/role", "worker"), null, null))
        .isEqualTo("kvrouter.io/role must be \"prefill\", \"decode\" or \"both\", got \"worker\"");
    assertThat(invalid(Map.of("kvrouter.io/all-blocks-cleared", "host"), 5557, null))
        .isEqualTo(
            "kvrouter.io/all-blocks-cleared must be \"device\" or \"all_tiers\", got \"host\"");
    assertThat(invalid(Map.of("kvrouter.io/topic", "t"), null, null))
        .isEqualTo("kvrouter.io/topic needs a container port named kv-events");
    assertThat(invalid(Map.of(), null, 5558))
        .isEqualTo("port kv-replay without a port named kv-events");
    assertThat(invalid(Map.of("kvrouter.io/dp-ranks", "0-65535"), 5557, null))
        .isEqualTo("kvrouter.io/dp-ranks names more than 1024 ranks: '0-65535'");
    assertThat(invalid(Map.of("kvrouter.io/dp-ranks", "0-1"), 5557, 5558))
        .isEqualTo(
            "ports kv-events 5557..5558 and kv-replay 5558..5559 overlap (every rank r uses port + r)");
    assertThat(invalid(Map.of("kvrouter.io/dp-ranks", "0-3"), 65534, null))
        .isEqualTo("port kv-events 65534 plus rank 3 is beyond 65535");
    Pod noHttp =
        new PodBuilder(pod(Map.of(), null, null))
            .editSpec()
            .editFirstContainer()
            .withPorts()
            .endContainer()
            .endSpec()
            .build();
    assertThat(PodEngines.of(noHttp, CONFIG, null).invalid())
        .isEqualTo("no container port named http");
    DiscoveryConfig noModel = DiscoveryConfig.labelSelector("test", "app=vllm");
    assertThat(PodEngines.of(pod(Map.of(), null, null), noModel, null).invalid())
        .isEqualTo("no kvrouter.io/model annotation and no default model configured");
  }

  @Test
  void dpRanksSyntax() {
    assertThat(PodEngines.parseRanks("0-3")).containsExactly(0, 1, 2, 3);
    assertThat(PodEngines.parseRanks(" 5 ")).containsExactly(5);
    assertThat(PodEngines.parseRanks("4,0-1")).containsExactly(0, 1, 4);
    assertThatThrownBy(() -> PodEngines.parseRanks("1,1"))
        .hasMessage("kvrouter.io/dp-ranks names rank 1 twice: '1,1'");
    assertThatThrownBy(() -> PodEngines.parseRanks("3-1"))
        .hasMessage("kvrouter.io/dp-ranks: '3-1' is not a rank or an ascending range, in '3-1'");
    assertThatThrownBy(() -> PodEngines.parseRanks("-1"))
        .hasMessage("kvrouter.io/dp-ranks: '-1' is not a rank or an ascending range, in '-1'");
    assertThatThrownBy(() -> PodEngines.parseRanks("a"))
        .hasMessage("kvrouter.io/dp-ranks must be ranks and ranges like '0-3' or '0,2', got 'a'");
    assertThatThrownBy(() -> PodEngines.parseRanks(""))
        .hasMessage("kvrouter.io/dp-ranks must be ranks and ranges like '0-3' or '0,2', got ''");
  }

  @Test
  void poolTargetPortsReplaceTheHttpPort() {
    Pod p = pod(Map.of(), 5557, null);
    assertThat(PodEngines.of(p, CONFIG, List.of(9000)).engines())
        .extracting(DiscoveredEngine::baseUrl)
        .containsExactly("http://10.1.2.3:9000");
    assertThat(PodEngines.of(p, CONFIG, List.of(9000, 9001)).engines())
        .extracting(e -> e.dpRank() + " " + e.baseUrl() + " " + e.eventsEndpoint())
        .containsExactly(
            "0 http://10.1.2.3:9000 tcp://10.1.2.3:5557",
            "1 http://10.1.2.3:9001 tcp://10.1.2.3:5558");
    Pod ranks = pod(Map.of("kvrouter.io/dp-ranks", "0-2"), null, null);
    assertThat(PodEngines.of(ranks, CONFIG, List.of(9000, 9001)).invalid())
        .isEqualTo(
            "the InferencePool has 2 target ports, one engine each, but kvrouter.io/dp-ranks names 3 ranks");
  }

  @Test
  void ipv6AddressesAreBracketed() {
    Pod p = pod(Map.of(), 5557, null);
    p.getStatus().setPodIP("fd00::12");
    DiscoveredEngine e = PodEngines.of(p, CONFIG, null).engines().get(0);
    assertThat(e.baseUrl()).isEqualTo("http://[fd00::12]:8000");
    assertThat(e.eventsEndpoint()).isEqualTo("tcp://[fd00::12]:5557");
  }

  @Test
  void readiness() {
    Pod ready = pod(Map.of(), null, null);
    assertThat(PodEngines.notServing(ready)).isNull();
    Pod notReady =
        new PodBuilder(ready).editStatus().withConditions(Pods.ready(false)).endStatus().build();
    assertThat(PodEngines.notServing(notReady)).isEqualTo(RemovalReason.NOT_READY);
    Pod noCondition = new PodBuilder(ready).editStatus().withConditions().endStatus().build();
    assertThat(PodEngines.notServing(noCondition)).isEqualTo(RemovalReason.NOT_READY);
    Pod noIp = new PodBuilder(ready).editStatus().withPodIP(null).endStatus().build();
    assertThat(PodEngines.notServing(noIp)).isEqualTo(RemovalReason.NOT_READY);
    Pod terminating =
        new PodBuilder(ready)
            .editMetadata()
            .withDeletionTimestamp("2026-01-01T00:00:00Z")
            .endMetadata()
            .build();
    assertThat(PodEngines.notServing(terminating)).isEqualTo(RemovalReason.TERMINATING);
  }

  @Test
  void instanceIdsAreStablePerUidAndFitInJsonNumbers() {
    long a = PodEngines.instanceId("6a1b3a57-8c0e-4d1f-9e35-5c3c4d1b2a10");
    assertThat(PodEngines.instanceId("6a1b3a57-8c0e-4d1f-9e35-5c3c4d1b2a10")).isEqualTo(a);
    assertThat(PodEngines.instanceId("6a1b3a57-8c0e-4d1f-9e35-5c3c4d1b2a11")).isNotEqualTo(a);
    for (int i = 0; i < 1000; i++) {
      assertThat(PodEngines.instanceId("uid-" + i)).isBetween(1L, (1L << 53) - 1);
    }
  }
}
