package io.kvrouter.discovery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.client.utils.Serialization;
import org.junit.jupiter.api.Test;

/** InferencePool v1 as the API server stores it, read as a generic resource. */
class PoolTargetTest {
  private static GenericKubernetesResource yaml(String spec) {
    return Serialization.unmarshal(
        "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\n"
            + "metadata: {name: pool, namespace: test}\n"
            + spec,
        GenericKubernetesResource.class);
  }

  @Test
  void readsSelectorAndTargetPorts() {
    PoolTarget t =
        PoolTarget.of(
            yaml(
                "spec:\n  selector: {matchLabels: {app: vllm, model: qwen3}}\n"
                    + "  targetPorts: [{number: 8000}, {number: 8001}]\n"
                    + "  endpointPickerRef: {name: epp, port: {number: 9002}}\n"));
    assertThat(t.selector()).hasToString("app=vllm,model=qwen3");
    assertThat(t.ports()).containsExactly(8000, 8001);
  }

  @Test
  void refusesWhatItCannotUse() {
    assertThatThrownBy(() -> PoolTarget.of(yaml("status: {}\n"))).hasMessage("it has no spec");
    assertThatThrownBy(() -> PoolTarget.of(yaml("spec: {targetPorts: [{number: 8000}]}\n")))
        .hasMessage("it has no spec.selector");
    assertThatThrownBy(
            () ->
                PoolTarget.of(
                    yaml(
                        "spec: {selector: {matchExpressions: [{key: a, operator: Exists}]},"
                            + " targetPorts: [{number: 8000}]}\n")))
        .hasMessage(
            "spec.selector.matchExpressions is not supported (InferencePool v1 selects by matchLabels)");
    assertThatThrownBy(
            () ->
                PoolTarget.of(
                    yaml("spec: {selector: {matchLabels: {}}, targetPorts: [{number: 8000}]}\n")))
        .hasMessage("spec.selector.matchLabels is missing or empty (it would select every pod)");
    assertThatThrownBy(() -> PoolTarget.of(yaml("spec: {selector: {matchLabels: {app: a}}}\n")))
        .hasMessage("spec.targetPorts is missing or empty");
    assertThatThrownBy(
            () ->
                PoolTarget.of(
                    yaml(
                        "spec: {selector: {matchLabels: {app: a}}, targetPorts: [{number: 70000}]}\n")))
        .hasMessage("spec.targetPorts[0].number is not a port number: 70000");
    assertThatThrownBy(
            () ->
                PoolTarget.of(
                    yaml(
                        "spec: {selector: {matchLabels: {app: a}},"
                            + " targetPorts: [{number: 8000}, {number: 8000}]}\n")))
        .hasMessage("spec.targetPorts names port 8000 twice");
  }
}
