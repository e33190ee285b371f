package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.mockengine.MockEngines;
import io.kvrouter.tokenize.ChatTemplateConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code kvrouter mock-engine}'s flags: documented, parsed into the configuration, checked. */
class MockEngineCommandTest {

  @Test
  void helpDocumentsEveryFlag() {
    StringWriter out = new StringWriter();
    int code =
        new CommandLine(new MockEngineCommand()).setOut(new PrintWriter(out)).execute("--help");
    assertThat(code).isZero();
    String help = out.toString();
    for (String flag :
        new String[] {
          "--host",
          "--port",
          "--model-dir",
          "--served-model-name",
          "--block-size",
          "--num-gpu-blocks",
          "--max-num-seqs",
          "--max-model-len",
          "--prefill-base-ms",
          "--prefill-ms-per-1k-tokens",
          "--decode-ms-per-token",
          "--speedup",
          "--default-max-tokens",
          "--seed",
          "--enable-prompt-tokens-details",
          "--kv-events-config",
          "--kv-events-encoding",
          "--fail-fraction",
          "--die-after-requests",
          "--die-after-seconds",
          "--http-start-delay-ms",
          "--zmq-start-delay-ms",
          "--stall-after-tokens",
          "--host-blocks",
          "--host-ms-per-block",
          "--exit-with-parent"
        }) {
      assertThat(help).as(flag).containsPattern("(?m)^\\s+" + flag + "(\\s|=)");
    }
    // every option has a description (picocli prints an empty one as nothing after the name)
    CommandLine.Model.CommandSpec spec = new CommandLine(new MockEngineCommand()).getCommandSpec();
    for (CommandLine.Model.OptionSpec o : spec.options()) {
      assertThat(String.join("", o.description())).as(o.longestName()).isNotBlank();
    }
  }

  @Test
  void flagsBecomeTheConfiguration() {
    MockEngineCommand c = new MockEngineCommand();
    new CommandLine(c)
        .parseArgs(
            "--port",
            "8100",
            "--block-size",
            "32",
            "--num-gpu-blocks",
            "100",
            "--enable-prompt-tokens-details",
            "--served-model-name",
            "m",
            "--speedup",
            "4",
            "--kv-events-encoding",
            "map",
            "--die-after-seconds",
            "1.5",
            "--host-blocks",
            "64",
            "--host-ms-per-block",
            "0.25",
            "--kv-events-config",
            "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\","
                + "\"replay_endpoint\":\"tcp://*:5558\",\"topic\":\"kv\",\"buffer_steps\":5}");
    MockEngineServer.Config cfg = c.config();
    assertThat(cfg.port()).isEqualTo(8100);
    assertThat(cfg.blockSize()).isEqualTo(32);
    assertThat(cfg.numGpuBlocks()).isEqualTo(100);
    assertThat(cfg.effectiveMaxModelLen()).isEqualTo(3200);
    assertThat(cfg.enablePromptTokensDetails()).isTrue();
    assertThat(cfg.servedModelName()).isEqualTo("m");
    assertThat(cfg.speedup()).isEqualTo(4.0);
    assertThat(cfg.eventEncoding()).isEqualTo(MockEngineServer.EventEncoding.MAP);
    assertThat(cfg.dieAfter()).isEqualTo(Duration.ofMillis(1500));
    assertThat(cfg.hostBlocks()).isEqualTo(64);
    assertThat(cfg.hostMsPerBlock()).isEqualTo(0.25);
    MockEngineCommand d = new MockEngineCommand();
    new CommandLine(d).parseArgs(); // picocli fills the defaults on parse
    assertThat(d.config().hostBlocks()).as("no host tier by default").isZero();
    assertThat(d.config().hostMsPerBlock()).as("simulate's default").isEqualTo(0.6);
    assertThat(cfg.kvEvents())
        .isEqualTo(
            new KvEventsConfig(true, "zmq", "tcp://*:5557", "tcp://*:5558", "kv", 5, 100_000));
  }

  @Test
  void badFlagsExitWith2AndSayWhy() {
    for (String[] args :
        new String[][] {
          {"--kv-events-config", "{\"enable_kv_cache_events\":true,\"endpont\":\"tcp://*:1\"}"},
          {"--kv-events-config", "not json"},
          {"--kv-events-encoding", "xml"},
          {"--num-gpu-blocks", "4", "--block-size", "16", "--max-model-len", "100"},
          {"--speedup", "0"},
          {"--host-blocks", "-1"},
          {"--host-ms-per-block", "-0.5"},
        }) {
      StringWriter err = new StringWriter();
      int code =
          new CommandLine(new MockEngineCommand()).setErr(new PrintWriter(err)).execute(args);
      assertThat(code).as(String.join(" ", args)).isEqualTo(2);
      assertThat(err.toString()).as(String.join(" ", args)).startsWith("kvrouter mock-engine: ");
    }
  }

  @Test
  void vllmsChatTemplateFlags() {
    MockEngineCommand c = new MockEngineCommand();
    new CommandLine(c)
        .parseArgs(
            "--model-dir",
            MockEngines.tinyModel().toString(),
            "--chat-template",
            "{{ messages | length }}",
            "--chat-template-content-format",
            "string",
            "--default-chat-template-kwargs",
            "{\"x\": 1}",
            "--trust-request-chat-template");
    MockEngineServer.Config cfg = c.config();
    assertThat(cfg.chatTemplate().template()).isEqualTo("{{ messages | length }}");
    assertThat(cfg.chatTemplate().contentFormat())
        .isEqualTo(ChatTemplateConfig.ContentFormat.STRING);
    assertThat(cfg.chatTemplate().defaultKwargs()).containsEntry("x", 1L);
    assertThat(cfg.trustRequestChatTemplate()).isTrue();
    MockEngineCommand d = new MockEngineCommand();
    new CommandLine(d).parseArgs();
    assertThat(d.config().chatTemplate().isDefault()).isTrue();
    assertThat(d.config().trustRequestChatTemplate()).isFalse();
  }
}
