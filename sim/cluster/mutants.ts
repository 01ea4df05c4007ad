// Broken cluster hosts (issues 16, 23, 33, 34), run by world.ts: each breaks
// one promise of the life cycle or the data path, and the invariant named
// beside it must catch it within 20 seeds (world_test.ts). Life-cycle and
// data-path mutants run in the same worlds, faults and all.
import type { ClusterFault, ClusterInvariant, ClusterMutant } from "./world.ts";

export type ClusterMutantSpec = {
  /** The break, as world.ts applies it (`runCluster(s, name)`). */
  name: ClusterMutant;
  breaks: string;
  /** The invariant that must catch it within 20 seeds. */
  caughtBy: ClusterInvariant;
  /** The faults its runs face; absent: all of them. */
  faults?: ClusterFault[];
  /** Its runs are the sweep's drawn scenarios (seeds 1-20), not one fixed fleet. */
  drawn?: true;
};

export const CLUSTER_MUTANT_SPECS: ClusterMutantSpec[] = [
  {
    name: "noDedup",
    breaks: "issue 16 a retried append is applied once",
    // Answers go direct now: a request admitted twice is what shows.
    caughtBy: "coreAccepts",
  },
  {
    name: "noLiveness",
    breaks: "issue 16 a dead instance's requests are requeued or ended",
    caughtBy: "noHangOnInstanceDeath",
  },
  {
    name: "everyoneExecutes",
    breaks:
      "issue 16 each socket effect is carried out by the one instance holding it (ownership.ts)",
    caughtBy: "socketEffectsOnce",
  },
  {
    name: "applyTimeClock",
    breaks: "issue 16 every replica applies an entry at the log's time",
    caughtBy: "replicasAgree",
  },
  {
    name: "ignoreSnapshot",
    breaks:
      "issue 23 a joiner loads the snapshot before replaying the trimmed log",
    caughtBy: "replicasAgree",
  },
  {
    name: "handshakeLeaks",
    breaks:
      "issue 23 an instance cut off from its log answers every worker handshake (defect 1)",
    caughtBy: "workersReturn",
  },
  {
    name: "leaveAtOnce",
    breaks:
      "issue 23 a stopping instance drains what it holds before it leaves",
    caughtBy: "leaveFinishesRequests",
    // Other faults would disturb the leave it is judged on.
    faults: ["leave"],
  },
  {
    name: "tokensPerInstance",
    breaks:
      "issue 26 a tenant's token limit holds over the whole fleet, every replica charging every completion",
    caughtBy: "fleetTokenLimit",
  },
  {
    name: "directSizeUncut",
    breaks:
      "issue 34 an answer on the direct path is cut at the stream limit, as on one server (C16)",
    caughtBy: "answerWithinLimit",
    faults: [],
  },
  {
    name: "directDeltasSkipped",
    breaks:
      "issue 33 a stream whose chunks went direct charges its content deltas to every token limit",
    caughtBy: "streamsCounted",
    faults: [],
  },
  {
    name: "wholeStreamErrs",
    breaks:
      "issue 33 item 4 a stream whose whole answer reached its client ends cleanly when its instance rejoins or gives up what it holds",
    caughtBy: "wholeStreamsEndClean",
    drawn: true,
  },
  {
    name: "leaveDropsDirect",
    breaks:
      "issue 34 a leaving instance keeps carrying the direct streams it holds until they end",
    caughtBy: "streamExact",
    faults: ["leave"],
  },
  {
    name: "writeBeforeCommit",
    breaks:
      "issue 23 no byte of a stream reaches its client before the stream's first-byte entry is applied",
    caughtBy: "streamExact",
  },
  {
    name: "endIgnoresPieces",
    breaks:
      "issue 23 a response ends only after every piece sent before its logged end arrived",
    caughtBy: "streamExact",
    faults: [],
  },
  {
    name: "dropEarlyPieces",
    breaks:
      "issue 23 pieces that reach the client's instance before it applied their dispatch are kept, not lost",
    caughtBy: "noLinkLossWithoutFault",
    faults: [],
  },
  {
    name: "endWaitsForever",
    breaks:
      "issue 23 an end whose pieces were lost with their link ends with an error",
    caughtBy: "noHangOnInstanceDeath",
    faults: ["crashAtEnd"],
  },
  {
    name: "giveUpOnHold",
    breaks:
      "issue 23 the log may blink; streams whose two ends are alive do not end",
    caughtBy: "holdKeepsStreams",
    faults: ["blip"],
  },
];
