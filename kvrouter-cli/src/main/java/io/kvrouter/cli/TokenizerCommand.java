package io.kvrouter.cli;

import io.kvrouter.tokenize.ChatTemplateConfig;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.TokenizerCheck;
import io.kvrouter.tokenize.TokenizerException;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvrouter tokenizer}: tokenizer tools; {@code check} compares with an engine. */
@Command(
    name = "tokenizer",
    mixinStandardHelpOptions = true,
    description = "Tokenizer tools.",
    subcommands = {TokenizerCommand.Check.class})
public final class TokenizerCommand implements Callable<Integer> {
  @Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    spec.commandLine()
        .getErr()
        .println("kvrouter tokenizer: name a tool, e.g. kvrouter tokenizer check --help");
    return 2;
  }

  /** {@code kvrouter tokenizer check --model-dir DIR --engine URL}. */
  @Command(
      name = "check",
      mixinStandardHelpOptions = true,
      description = {
        "Renders and tokenizes built-in probe conversations and prompts with the model directory and"
            + " through the engine's POST /tokenize (vLLM's API), and prints the first differing"
            + " token of each mismatch.",
        "Exit code: 0 when every probe matches, 1 on any mismatch or when the check cannot run, 2 on"
            + " a usage error."
      })
  public static final class Check implements Callable<Integer> {
    @Spec CommandLine.Model.CommandSpec spec;

    @Option(
        names = "--model-dir",
        required = true,
        paramLabel = "DIR",
        description = "Hugging Face model directory (tokenizer.json, tokenizer_config.json, ...)")
    Path modelDir;

    @Option(
        names = "--engine",
        required = true,
        paramLabel = "URL",
        description = "the engine's base URL, e.g. http://127.0.0.1:8000")
    URI engine;

    @Option(
        names = "--model",
        paramLabel = "NAME",
        description = "model name to send (default: the first one the engine lists at /v1/models)")
    String model;

    @Option(
        names = "--timeout-seconds",
        defaultValue = "30",
        paramLabel = "S",
        description = "per-request timeout (default ${DEFAULT-VALUE})")
    int timeoutSeconds;

    /** The gateway's chat-template flags, to check a gateway's settings against the engine's. */
    @Mixin ChatTemplateOptions chatTemplate = new ChatTemplateOptions();

    @Override
    public Integer call() {
      PrintWriter out = spec.commandLine().getOut();
      PrintWriter err = spec.commandLine().getErr();
      ChatTemplateConfig chat;
      try {
        chat = chatTemplate.common(Set.of());
      } catch (IllegalArgumentException e) {
        err.println("kvrouter tokenizer check: " + e.getMessage());
        err.flush();
        return 2;
      }
      try (Tokenizer tok = Tokenizer.load(modelDir, Tokenizer.DEFAULT_CACHE_BYTES, chat)) {
        EngineTokenizer client =
            new EngineTokenizer(engine, model, Duration.ofSeconds(timeoutSeconds));
        String name = model;
        if (name == null) {
          try {
            name = client.firstServedModel();
          } catch (EngineTokenizer.UnreachableException e) {
            throw e;
          } catch (TokenizerException e) {
            name = null; // engines without /v1/models: send no model name
          }
          client = new EngineTokenizer(engine, name, Duration.ofSeconds(timeoutSeconds));
        }
        TokenizerCheck.Report r = TokenizerCheck.run(tok, client, out);
        return r.mismatched() == 0 ? 0 : 1;
      } catch (TokenizerException e) {
        err.println("kvrouter tokenizer check: " + e.getMessage());
        err.flush();
        return 1;
      }
    }
  }
}
