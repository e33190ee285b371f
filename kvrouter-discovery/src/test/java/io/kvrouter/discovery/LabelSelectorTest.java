package io.kvrouter.discovery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;

class LabelSelectorTest {
  @Test
  void parsesTheApiServersSyntax() {
    assertThat(LabelSelector.parse("app=vllm")).hasToString("app=vllm");
    assertThat(LabelSelector.parse(" app == vllm , tier!=cpu ")).hasToString("app=vllm,tier!=cpu");
    assertThat(LabelSelector.parse("env in (a, b),kvrouter.io/gpu,!canary,x notin (y)"))
        .hasToString("env in (a,b),kvrouter.io/gpu,!canary,x notin (y)");
    assertThat(LabelSelector.ofMatchLabels(Map.of("b", "2", "a", "1"))).hasToString("a=1,b=2");
    assertThat(LabelSelector.parse("a=1,b=2"))
        .isEqualTo(LabelSelector.ofMatchLabels(Map.of("b", "2", "a", "1")));
  }

  @Test
  void refusesWhatIsNotASelector() {
    assertThatThrownBy(() -> LabelSelector.parse(" "))
        .hasMessage("label selector is empty (it would select every pod of the namespace)");
    assertThatThrownBy(() -> LabelSelector.parse("app=vllm,"))
        .hasMessage("label selector 'app=vllm,': empty requirement");
    assertThatThrownBy(() -> LabelSelector.parse("=vllm"))
        .hasMessage("label selector '=vllm': '=vllm' has no key");
    assertThatThrownBy(() -> LabelSelector.parse("app=v llm"))
        .hasMessage("label selector 'app=v llm': 'v llm' is not a label value (of key 'app')");
    assertThatThrownBy(() -> LabelSelector.parse("env in (a,b"))
        .hasMessage("label selector 'env in (a,b': 'env in (a,b' does not end with ')'");
    assertThatThrownBy(() -> LabelSelector.parse("env within (a)"))
        .hasMessage(
            "label selector 'env within (a)': 'env within (a)' is not 'key in (...)' or 'key notin (...)'");
    assertThatThrownBy(() -> LabelSelector.ofMatchLabels(Map.of()))
        .hasMessage("matchLabels is empty");
  }
}
