package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Runs clients/openai-node/sdk-check.mjs, the official OpenAI JavaScript SDK ({@code openai} from
 * npm, pinned by its lock file), against an OpenAI base URL: for OpenAiNodeSdkTest here and the
 * gateway's GatewayOpenAiSdkTest (through this module's test jar). Needs {@code
 * clients/openai-node/install.sh} (npm ci) to have run, as .ci/run does: without it the test fails,
 * unless {@code -Dkvrouter.sdk.skip=true} leaves it out on purpose (an aborted assumption).
 */
public final class NodeSdkCheck {
  private NodeSdkCheck() {}

  /** What sdk-check.mjs printed on stdout (its JSON summary) and its exit code. */
  public record Result(String out, int exitValue) {}

  /**
   * Runs {@code node sdk-check.mjs baseUrl model flags...} (its stderr goes to this process's) and
   * waits for it at most 60 s; fails the test when the npm package or Node is missing or it does
   * not finish.
   */
  public static Result run(String baseUrl, String model, String... flags) throws Exception {
    Path dir = requireSdk();
    List<String> command = new ArrayList<>();
    command.add("node");
    command.add(dir.resolve("sdk-check.mjs").toString());
    command.add(baseUrl);
    command.add(model);
    command.addAll(List.of(flags));
    Process p;
    try {
      p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    } catch (IOException x) {
      return fail("the OpenAI SDK test runs Node, which is not on PATH: " + x.getMessage());
    }
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(60, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail("sdk-check.mjs did not finish in 60 s: " + out);
    }
    return new Result(out, p.exitValue());
  }

  /**
   * The SDK's directory (clients/openai-node); aborts the test with -Dkvrouter.sdk.skip=true, fails
   * it when the npm package is not installed. A test calls it first, before starting servers.
   */
  public static Path requireSdk() {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.sdk.skip"),
        "OpenAI SDK test left out on purpose (-Dkvrouter.sdk.skip=true)");
    Path dir = repoRoot().resolve("clients/openai-node");
    if (!Files.exists(dir.resolve("node_modules/openai/package.json"))) {
      fail(
          "the OpenAI SDK test needs its npm package: run clients/openai-node/install.sh (.ci/run"
              + " does it), or pass -Dkvrouter.sdk.skip=true to leave the test out. Missing: "
              + dir.resolve("node_modules/openai"));
    }
    return dir;
  }

  /** The repository's root: the working directory, or its parent when that is a module's. */
  static Path repoRoot() {
    Path p = Path.of("").toAbsolutePath();
    return Files.exists(p.resolve("clients")) ? p : p.getParent();
  }
}
