// The cluster replica's import surface (issue 16): shell/server/cluster and sim/.
export {
  type Applied,
  applyRecord,
  type ClusterState,
  DEFAULT_LIVENESS,
  initialClusterState,
  type InstanceView,
  isLive,
  type Liveness,
} from "./replica.ts";
export {
  type ClusterRecord,
  type CutReason,
  decodeRecord,
  encodeRecord,
  type InstanceId,
  REDUCER_VERSION,
} from "./record.ts";
export {
  configDigest,
  decodeSnapshot,
  digestOf,
  encodeSnapshot,
  stateDigest,
} from "./snapshot.ts";
export {
  type ChunkRoute,
  DATA_PATH_DEFAULTS,
  type DirectChunk,
  dispatched,
  type EndRoute,
  expectPieces,
  forgetSent,
  LINK_LOST,
  linkBroke,
  logEffect,
  peerGone,
  pieceArrived,
  piecesBefore,
  type ReceiverAction,
  receiverDue,
  type Receivers,
  requestEnded,
  routeChunk,
  routeEnd,
  type Senders,
} from "./data_path.ts";
export {
  LOG_HOLD_DEFAULTS,
  resumeAfterHold,
  type ResumeCheck,
  type ResumeDecision,
} from "./log_hold.ts";
