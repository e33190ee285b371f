package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.kvrouter.discovery.DiscoveryConfig;
import io.kvrouter.route.EngineRole;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The {@code --discovery} flags of {@code gateway} and {@code serve}: their usage errors (exit 2,
 * one line), their defaults, and the config files of deploy/ read as the gateway reads them.
 */
class DiscoveryOptionsTest {
  @TempDir Path dir;

  private static String usageError(String command, String... args) {
    StringWriter err = new StringWriter();
    CommandLine cl =
        new CommandLine(command.equals("gateway") ? new GatewayCommand() : new ServeCommand())
            .setErr(new PrintWriter(err, true))
            .setOut(new PrintWriter(new StringWriter(), true));
    assertThat(cl.execute(args)).as(err.toString()).isEqualTo(2);
    return err.toString();
  }

  @Test
  void wrongOrMissingFlagsAreUsageErrors() {
    assertThat(usageError("gateway", "--model", "m", "--discovery-selector", "app=x"))
        .contains("--discovery-selector needs --discovery kubernetes");
    assertThat(usageError("gateway", "--model", "m", "--discovery", "consul"))
        .contains("--discovery: 'consul' is not a kind of discovery (there is: kubernetes)");
    assertThat(usageError("gateway", "--model", "m", "--discovery", "kubernetes"))
        .contains("--discovery kubernetes needs --discovery-namespace");
    assertThat(
            usageError(
                "serve",
                "--discovery",
                "kubernetes",
                "--discovery-namespace",
                "llm",
                "--discovery-selector",
                "app=x",
                "--discovery-inference-pool",
                "p"))
        .contains("either --discovery-selector or --discovery-inference-pool, not both");
    assertThat(usageError("serve", "--discovery", "kubernetes", "--discovery-namespace", "llm"))
        .contains("needs either --discovery-selector or --discovery-inference-pool");
    assertThat(
            usageError(
                "gateway",
                "--model",
                "m",
                "--discovery",
                "kubernetes",
                "--discovery-namespace",
                "llm",
                "--discovery-selector",
                "app in (a"))
        .contains("kvrouter gateway: discovery: ");
    assertThat(
            usageError(
                "serve",
                "--discovery",
                "kubernetes",
                "--discovery-namespace",
                "llm",
                "--discovery-selector",
                "app=x",
                "--discovery-role",
                "decoder"))
        .contains("--discovery-role must be \"prefill\", \"decode\" or \"both\"");
  }

  @Test
  void defaultsComeFromTheCommandAndTheFlagsWin() {
    DiscoveryOptions o = new DiscoveryOptions();
    new CommandLine(o)
        .parseArgs(
            "--discovery",
            "kubernetes",
            "--discovery-namespace",
            "llm",
            "--discovery-selector",
            "app=vllm");
    DiscoveryConfig c = o.config("qwen3", 32);
    assertThat(c.namespace()).isEqualTo("llm");
    assertThat(c.labelSelector()).isEqualTo("app=vllm");
    assertThat(c.defaultModel()).isEqualTo("qwen3");
    assertThat(c.defaultBlockSize()).isEqualTo(32);
    assertThat(c.defaultRole()).isEqualTo(EngineRole.BOTH);
    assertThat(o.drainBound()).isEqualTo(Duration.ofSeconds(30));

    DiscoveryOptions p = new DiscoveryOptions();
    new CommandLine(p)
        .parseArgs(
            "--discovery=kubernetes",
            "--discovery-namespace=llm",
            "--discovery-inference-pool=pool",
            "--discovery-model=other",
            "--discovery-block-size=64",
            "--discovery-role=decode",
            "--discovery-drain-seconds=5");
    DiscoveryConfig d = p.config("qwen3", 16);
    assertThat(d.inferencePool()).isEqualTo("pool");
    assertThat(d.labelSelector()).isNull();
    assertThat(d.defaultModel()).isEqualTo("other");
    assertThat(d.defaultBlockSize()).isEqualTo(64);
    assertThat(d.defaultRole()).isEqualTo(EngineRole.DECODE);
    assertThat(p.drainBound()).isEqualTo(Duration.ofSeconds(5));

    assertThat(new DiscoveryOptions().config("qwen3", 16)).isNull();
  }

  /** The gateway of deploy/'s config file and deployment.yaml's arguments, as it parses them. */
  private GatewayCommand deployed(String configMap) throws Exception {
    ConfigMap cm;
    try (InputStream in = Files.newInputStream(Path.of(configMap))) {
      cm = Serialization.unmarshal(in, ConfigMap.class);
    }
    Path file = dir.resolve("gateway.properties");
    Files.writeString(file, cm.getData().get("gateway.properties"));
    GatewayCommand c = new GatewayCommand();
    CommandLine cl = new CommandLine(c);
    cl.parseArgs("--config", file.toString(), "--discovery-namespace", "llm");
    StringWriter err = new StringWriter();
    GatewayCommand eff =
        ConfigFileArgs.reparse(
            cl.getCommandSpec(),
            file,
            "kvrouter gateway",
            GatewayCommand.MULTI,
            GatewayCommand::new,
            new PrintWriter(err, true));
    assertThat(eff).as(err.toString()).isNotNull();
    return eff;
  }

  @Test
  void theDeployConfigFilesAreWhatTheGatewayReads() throws Exception {
    GatewayCommand base = deployed("../deploy/base/configmap.yaml");
    DiscoveryConfig c = base.discovery.config("qwen3", base.blockSize);
    assertThat(c.namespace()).isEqualTo("llm");
    assertThat(c.labelSelector()).isEqualTo("app=vllm-qwen3");
    assertThat(c.defaultModel()).isEqualTo("qwen3");
    assertThat(base.edge.shutdownGraceSeconds).isEqualTo(30);
    assertThat(base.edge.port).isEqualTo(8080);

    GatewayCommand pool = deployed("../deploy/overlays/inference-pool/configmap-patch.yaml");
    DiscoveryConfig p = pool.discovery.config("qwen3", pool.blockSize);
    assertThat(p.inferencePool()).isEqualTo("vllm-qwen3");
    assertThat(p.labelSelector()).isNull();
  }
}
