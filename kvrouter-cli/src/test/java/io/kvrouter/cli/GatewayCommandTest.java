package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.admission.TokenRateConfig;
import io.kvrouter.gateway.AdmissionConfig;
import io.kvrouter.gateway.EngineSpec;
import io.kvrouter.gateway.GatewayConfig;
import io.kvrouter.route.EngineRole;
import io.kvrouter.route.PairRouter;
import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.transport.kvevents.ClearScope;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code kvrouter gateway}'s flags: parsing, --config, and the usage errors (exit 2). */
class GatewayCommandTest {
  static int run(StringWriter err, String... args) {
    return new CommandLine(new GatewayCommand())
        .setErr(new PrintWriter(err, true))
        .setOut(new PrintWriter(new StringWriter(), true))
        .execute(args);
  }

  @Test
  void usageErrorsExit2WithOneLine() throws Exception {
    StringWriter err = new StringWriter();
    assertThat(run(err, "--port", "0")).isEqualTo(2);
    assertThat(err.toString()).contains("give at least one --model NAME=DIR");
    err = new StringWriter();
    assertThat(run(err, "--model", "m=/no/such/dir")).isEqualTo(2);
    assertThat(err.toString()).contains("is not a directory");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--engine", "ftp://x")).isEqualTo(2);
    assertThat(err.toString()).contains("must start with the engine's http:// base URL");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--lora", "nobase")).isEqualTo(2);
    assertThat(err.toString()).contains("expected ADAPTER=BASE");
  }

  @Test
  void engineSpecs() {
    EngineSpec e =
        EngineSpec.parse(
            "http://10.0.0.5:8000;events=tcp://10.0.0.5:5557;replay=tcp://10.0.0.5:5558;model=q;block_size=32;instance_id=7");
    assertThat(e)
        .isEqualTo(
            new EngineSpec(
                "http://10.0.0.5:8000",
                "q",
                32,
                7,
                0,
                "tcp://10.0.0.5:5557",
                "tcp://10.0.0.5:5558",
                null));
    assertThat(EngineSpec.parse("http://a:1;role=decode").role()).isEqualTo(EngineRole.DECODE);
    assertThat(EngineSpec.parse("http://a:1").role()).isEqualTo(EngineRole.BOTH);
    assertThat(EngineSpec.parse("http://a:1").clearScope()).isEqualTo(ClearScope.DEVICE);
    assertThat(
            EngineSpec.parse("http://a:1;events=tcp://a:5557;all_blocks_cleared=all_tiers")
                .clearScope())
        .isEqualTo(ClearScope.ALL_TIERS);
    assertThatThrownBy(
            () -> EngineSpec.parse("http://a:1;events=tcp://a:5557;all_blocks_cleared=x"))
        .hasMessageContaining("all_blocks_cleared must be \"device\" or \"all_tiers\"");
    assertThatThrownBy(() -> EngineSpec.parse("http://a:1;all_blocks_cleared=all_tiers"))
        .hasMessageContaining("all_blocks_cleared= needs events=");
    assertThatThrownBy(() -> EngineSpec.parse("http://a:1;role=decoder"))
        .hasMessageContaining("role must be \"prefill\", \"decode\" or \"both\"");
    assertThatThrownBy(() -> EngineSpec.parse("http://a:1;colour=red"))
        .hasMessageContaining("unknown key 'colour'");
    assertThatThrownBy(() -> EngineSpec.parse("http://a:1;replay=tcp://a:2"))
        .hasMessageContaining("replay= needs events=");
  }

  @Test
  void theAdmissionFlagsMakeTheQueueAndTheBusyLimit() {
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c)
        .parseArgs(
            "--model",
            "m",
            "--busy-requests",
            "8",
            "--max-queue-depth",
            "5",
            "--max-queue-time",
            "1500ms",
            "--queue-starvation-limit",
            "3",
            "--tenant-from",
            "user",
            "--tenant-weight",
            "acme=2.5",
            "--tenant-weight",
            "small=0.5",
            "--default-decode-tokens",
            "64",
            "--max-tenant-labels",
            "4");
    assertThat(c.gatewayConfig().admission())
        .isEqualTo(
            new AdmissionConfig(
                    5,
                    Duration.ofMillis(1500),
                    3,
                    AdmissionConfig.TenantSource.USER,
                    Map.of("acme", 2.5, "small", 0.5),
                    64,
                    4)
                .withExcessFactor(AdmissionConfig.DEFAULT_EXCESS_FACTOR));
    assertThat(c.routing.settings().busyRequests()).isEqualTo(8);
    GatewayCommand d = new GatewayCommand();
    new CommandLine(d).parseArgs("--model", "m");
    assertThat(d.gatewayConfig().admission()).isEqualTo(AdmissionConfig.DEFAULTS);
    assertThat(d.routing.settings().busyRequests()).as("off by default").isZero();
    assertThat(AdmissionOptions.duration("--x", "2m")).isEqualTo(Duration.ofMinutes(2));
    assertThat(AdmissionOptions.duration("--x", "30")).isEqualTo(Duration.ofSeconds(30));

    StringWriter err = new StringWriter();
    assertThat(run(err, "--model", "m", "--tenant-from", "ip")).isEqualTo(2);
    assertThat(err.toString()).contains("--tenant-from must be key, header or user, got 'ip'");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--max-queue-time", "soon")).isEqualTo(2);
    assertThat(err.toString()).contains("--max-queue-time must be a positive duration");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--tenant-weight", "a=0")).isEqualTo(2);
    assertThat(err.toString()).contains("the weight of tenant 'a' must be finite and > 0");

    GatewayCommand b = new GatewayCommand();
    new CommandLine(b).parseArgs("--model", "m", "--tenant-excess-factor", "4");
    assertThat(b.gatewayConfig().admission())
        .isEqualTo(AdmissionConfig.DEFAULTS.withExcessFactor(4));
    assertThat(AdmissionConfig.DEFAULTS.excessFactor()).as("on by default").isEqualTo(4);
    GatewayCommand off = new GatewayCommand();
    new CommandLine(off).parseArgs("--model", "m", "--tenant-excess-factor", "0");
    assertThat(off.gatewayConfig().admission().excessFactor()).isZero();
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--tenant-excess-factor", "0.5")).isEqualTo(2);
    assertThat(err.toString()).contains("excessFactor must be 0 (off) or finite and >= 1, got 0.5");
  }

  @Test
  void theTokenRateFlagsSetADefaultAndPerTenantRates() {
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c)
        .parseArgs(
            "--model",
            "m",
            "--tenant-token-rate",
            "500",
            "--tenant-token-rate",
            "acme=2000",
            "--tenant-token-burst",
            "30s",
            "--max-rate-tenants",
            "50");
    assertThat(c.gatewayConfig().admission().tokenRates())
        .isEqualTo(new TokenRateConfig(500, Map.of("acme", 2000.0), Duration.ofSeconds(30), 50));
    GatewayCommand d = new GatewayCommand();
    new CommandLine(d).parseArgs("--model", "m");
    assertThat(d.gatewayConfig().admission().tokenRates().on()).as("off by default").isFalse();

    StringWriter err = new StringWriter();
    assertThat(run(err, "--model", "m", "--tenant-token-rate", "fast")).isEqualTo(2);
    assertThat(err.toString()).contains("--tenant-token-rate fast: TOKENS_PER_S must be a number");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--tenant-token-rate", "a=-1")).isEqualTo(2);
    assertThat(err.toString()).contains("the token rate of tenant 'a' must be finite and > 0");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--tenant-token-rate", "1", "--tenant-token-rate", "2"))
        .isEqualTo(2);
    assertThat(err.toString()).contains("a default rate was given already");
  }

  @Test
  void theValueBudgetFlagsSetTheGatewaysParsedValueLimits() {
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c)
        .parseArgs("--model", "m", "--max-request-values", "1000", "--max-inflight-values", "1500");
    assertThat(c.gatewayConfig().maxRequestValues()).isEqualTo(1000);
    assertThat(c.gatewayConfig().maxInflightValues()).isEqualTo(1500);
    GatewayCommand d = new GatewayCommand();
    new CommandLine(d).parseArgs("--model", "m");
    assertThat(d.gatewayConfig().maxRequestValues()).isEqualTo(250_000);
    assertThat(d.gatewayConfig().maxInflightValues()).isEqualTo(4_000_000);

    StringWriter err = new StringWriter();
    assertThat(run(err, "--model", "m", "--max-request-values", "0")).isEqualTo(2);
    assertThat(err.toString()).contains("--max-request-values must be >= 1, got 0");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--max-inflight-values", "-5")).isEqualTo(2);
    assertThat(err.toString()).contains("--max-inflight-values must be >= 1, got -5");
    err = new StringWriter();
    assertThat(run(err, "--model", "m", "--max-request-values", "10", "--max-inflight-values", "5"))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains("--max-inflight-values (5) must be >= --max-request-values (10)");
  }

  @Test
  void theWriteTimeoutFlagIsServesAndReachesTheGatewaysServer() {
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c).parseArgs("--model", "m", "--write-timeout-ms", "250");
    assertThat(c.serverConfig().writeTimeout()).isEqualTo(Duration.ofMillis(250));
    GatewayCommand d = new GatewayCommand();
    new CommandLine(d).parseArgs("--model", "m");
    assertThat(d.serverConfig().writeTimeout()).isEqualTo(Duration.ofSeconds(30));

    StringWriter err = new StringWriter();
    assertThat(run(err, "--model", "m", "--write-timeout-ms", "0")).isEqualTo(2);
    assertThat(err.toString()).contains("--write-timeout-ms must be >= 1, got 0");
  }

  @Test
  void theLoraTermIsInTheCostWithPlacementOnly() {
    GatewayCommand off = new GatewayCommand();
    new CommandLine(off).parseArgs("--model", "m");
    assertThat(off.scorers(off.sessionConfig()).names()).doesNotContain("lora");
    GatewayCommand on = new GatewayCommand();
    new CommandLine(on).parseArgs("--model", "m", "--lora-placement");
    assertThat(on.scorers(on.sessionConfig()).weight("lora")).isEqualTo(1.0);
    GatewayCommand weighted = new GatewayCommand();
    new CommandLine(weighted).parseArgs("--model", "m", "--lora-placement", "--scorer", "lora=3");
    assertThat(weighted.scorers(weighted.sessionConfig()).weight("lora")).isEqualTo(3.0);
    GatewayCommand stray = new GatewayCommand();
    new CommandLine(stray).parseArgs("--model", "m", "--scorer", "lora=3");
    assertThatThrownBy(() -> stray.scorers(stray.sessionConfig()))
        .hasMessage("--scorer lora=3 needs --lora-placement");
  }

  @Test
  void theDisaggregationFlagsMakeTheRule() {
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c)
        .parseArgs(
            "--model",
            "m",
            "--pd-min-uncached-tokens",
            "256",
            "--pd-max-prefill-queue-tokens",
            "9");
    assertThat(c.gatewayConfig().disaggregation()).isEqualTo(new PairRouter.Config(256, 9));
    GatewayCommand d = new GatewayCommand();
    new CommandLine(d).parseArgs("--model", "m");
    assertThat(d.gatewayConfig().disaggregation()).isEqualTo(PairRouter.Config.defaults());
  }

  @Test
  void aConfigFileGivesSeveralModelsAndEnginesAndTheCommandLineWins(@TempDir Path dir)
      throws Exception {
    Path cfg = dir.resolve("gw.properties");
    Files.writeString(
        cfg,
        "port=9999\nmodel=a b\nlora=a-sql=a\nmax-attempts=3\n"
            + "engine=http://h1:8000;events=tcp://h1:5557 http://h2:8000\n");
    GatewayCommand c = new GatewayCommand();
    CommandLine cl = new CommandLine(c);
    cl.parseArgs("--config", cfg.toString(), "--max-attempts", "4");
    // the same merge the command does before it runs
    GatewayCommand eff =
        ConfigFileArgs.reparse(
            cl.getCommandSpec(),
            cfg,
            "kvrouter gateway",
            GatewayCommand.MULTI,
            GatewayCommand::new,
            new PrintWriter(new StringWriter()));
    assertThat(eff.edge.port).isEqualTo(9999);
    assertThat(eff.maxAttempts).isEqualTo(4);
    assertThat(eff.models).containsExactly("a", "b");
    assertThat(eff.engines)
        .containsExactly("http://h1:8000;events=tcp://h1:5557", "http://h2:8000");
    GatewayConfig g = eff.gatewayConfig();
    assertThat(g.models()).containsKeys("a", "b");
    assertThat(g.models().get("a")).isNull(); // tokenized by its engines
    assertThat(g.loras()).containsEntry("a-sql", "a");
    assertThat(g.maxAttempts()).isEqualTo(4);
  }

  @Test
  void chatTemplateFlagsAsVllmsWithAPerModelForm(@TempDir Path dir) throws Exception {
    Path a = dir.resolve("a");
    Path b = dir.resolve("b");
    Files.createDirectories(a);
    Files.createDirectories(b);
    Path file = dir.resolve("hermes.jinja");
    Files.writeString(file, "{{ 'from file' }}");
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c)
        .parseArgs(
            "--model",
            "qwen=" + a,
            "--model",
            "llama=" + b,
            "--chat-template",
            file.toString(),
            "--chat-template",
            "llama={{ 'llama own' }}",
            "--chat-template-content-format",
            "openai",
            "--default-chat-template-kwargs",
            "{\"enable_thinking\": false}",
            "--trust-request-chat-template");
    GatewayConfig.Chat chat = c.gatewayConfig().chat();
    assertThat(chat.trustRequestTemplate()).isTrue();
    assertThat(chat.forModel("qwen").template()).isEqualTo("{{ 'from file' }}");
    assertThat(chat.forModel("qwen").origin()).isEqualTo(file.toString());
    assertThat(chat.forModel("llama").template()).isEqualTo("{{ 'llama own' }}");
    assertThat(chat.forModel("llama").contentFormat())
        .isEqualTo(ChatTemplateConfig.ContentFormat.OPENAI);
    assertThat(chat.forModel("qwen").defaultKwargs()).containsEntry("enable_thinking", false);
    GatewayCommand plain = new GatewayCommand();
    new CommandLine(plain).parseArgs("--model", "m");
    assertThat(plain.gatewayConfig().chat()).isEqualTo(GatewayConfig.Chat.defaults());
    GatewayCommand missing = new GatewayCommand();
    new CommandLine(missing)
        .parseArgs("--model", "m=" + a, "--chat-template", dir.resolve("nope.jinja").toString());
    assertThatThrownBy(missing::gatewayConfig)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("looks like a file path, but it cannot be read");
  }

  @Test
  void aConfigFileGivesPerModelTemplatesAndTheToolChoiceFlag(@TempDir Path dir) throws Exception {
    Path a = dir.resolve("a");
    Path b = dir.resolve("b");
    Files.createDirectories(a);
    Files.createDirectories(b);
    Path hermes = dir.resolve("hermes.jinja");
    Files.writeString(hermes, "{{ 'hermes' }}");
    Path cfg = dir.resolve("gw.properties");
    Files.writeString(
        cfg,
        "model=qwen="
            + a
            + " llama="
            + b
            + "\nchat-template.qwen="
            + hermes
            + "\nchat-template.llama={{ 'llama own' }}\n"
            + "exclude-tools-when-tool-choice-none=true\n");
    GatewayCommand c = new GatewayCommand();
    CommandLine cl = new CommandLine(c);
    cl.parseArgs("--config", cfg.toString());
    StringWriter err = new StringWriter();
    GatewayCommand eff =
        ConfigFileArgs.reparse(
            cl.getCommandSpec(),
            cfg,
            "kvrouter gateway",
            GatewayCommand.MULTI,
            GatewayCommand::new,
            new PrintWriter(err));
    assertThat(eff).as(err.toString()).isNotNull();
    GatewayConfig.Chat chat = eff.gatewayConfig().chat();
    assertThat(chat.forModel("qwen").template()).isEqualTo("{{ 'hermes' }}");
    assertThat(chat.forModel("llama").template()).isEqualTo("{{ 'llama own' }}");
    assertThat(chat.forModel("qwen").excludeToolsWhenToolChoiceNone()).isTrue();
    assertThat(chat.forModel("llama").excludeToolsWhenToolChoiceNone()).isTrue();
    // a dotted key of a flag that does not repeat is still an unknown key
    Files.writeString(cfg, "port.x=1\n");
    StringWriter err2 = new StringWriter();
    assertThat(
            ConfigFileArgs.reparse(
                cl.getCommandSpec(),
                cfg,
                "kvrouter gateway",
                GatewayCommand.MULTI,
                GatewayCommand::new,
                new PrintWriter(err2)))
        .isNull();
    assertThat(err2.toString()).contains("unknown key 'port.x'");
  }
}
