#include "TestFiles.h"

#include "runtime/Checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace q3::runtime {
namespace {

using testing::f32Tensor;
using testing::TempDir;
using testing::writeText;

// Two shards and an index that maps each tensor to its shard.
void writeShardedCheckpoint(const TempDir &dir) {
  writeSafeTensors(
      dir.file("model-00001-of-00002.safetensors"),
      {f32Tensor("model.embed_tokens.weight", {4, 2}), f32Tensor("model.norm.weight", {2}, 1)});
  writeSafeTensors(dir.file("model-00002-of-00002.safetensors"),
                   {f32Tensor("lm_head.weight", {4, 2}, 3)});
  writeText(dir.file("model.safetensors.index.json"), R"({
    "metadata": {"total_size": 72},
    "weight_map": {
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.norm.weight": "model-00001-of-00002.safetensors",
      "lm_head.weight": "model-00002-of-00002.safetensors"
    }})");
}

TEST(Checkpoint, ShardedFolder) {
  TempDir dir;
  writeShardedCheckpoint(dir);
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.tensorNames(),
            (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                      "model.norm.weight"}));
  const TensorView *head = checkpoint.find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->file, dir.file("model-00002-of-00002.safetensors"));
  EXPECT_EQ(readAsF32(*head)[0], 3.0f);
  EXPECT_EQ(readAsF32(*checkpoint.find("model.norm.weight")), (std::vector<float>{1, 2}));
  EXPECT_EQ(checkpoint.find("nope"), nullptr);
  EXPECT_EQ(checkpoint.description(), dir.path());

  // Moving the checkpoint keeps its views valid (the files are owned on the heap).
  Checkpoint moved = std::move(checkpoint);
  EXPECT_EQ(readAsF32(*moved.find("lm_head.weight"))[1], 4.0f);
  // The index file itself can be given too.
  EXPECT_EQ(Checkpoint::open(dir.file("model.safetensors.index.json")).tensorNames().size(), 3u);
}

TEST(Checkpoint, SingleFileFolderAndPlainFile) {
  TempDir dir;
  writeSafeTensors(dir.file("model.safetensors"), {f32Tensor("w", {3})});
  EXPECT_EQ(Checkpoint::open(dir.path()).tensorNames(), (std::vector<std::string>{"w"}));
  EXPECT_EQ(Checkpoint::open(dir.file("model.safetensors")).tensorNames(),
            (std::vector<std::string>{"w"}));
}

TEST(Checkpoint, MissingPathsAndEmptyFolders) {
  TempDir dir;
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.file("absent")),
                    "absent: cannot open checkpoint: No such file");
  EXPECT_LOAD_ERROR(
      Checkpoint::open(dir.path()),
      "expected model.safetensors or model.safetensors.index.json in the checkpoint folder");
}

TEST(Checkpoint, IndexNamesAMissingShard) {
  TempDir dir;
  writeShardedCheckpoint(dir);
  std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()),
                    "model-00002-of-00002.safetensors: cannot open: No such file");
}

TEST(Checkpoint, IndexEntryNotInItsShard) {
  TempDir dir;
  writeShardedCheckpoint(dir);
  writeText(dir.file("model.safetensors.index.json"), R"({"weight_map": {
      "model.norm.weight": "model-00001-of-00002.safetensors",
      "model.ghost.weight": "model-00001-of-00002.safetensors"}})");
  EXPECT_LOAD_ERROR(
      Checkpoint::open(dir.path()),
      "model.safetensors.index.json: weight_map says tensor 'model.ghost.weight' is in "
      "'model-00001-of-00002.safetensors', but no shard has it");
}

TEST(Checkpoint, IndexEntryPointsAtTheWrongShard) {
  TempDir dir;
  writeShardedCheckpoint(dir);
  writeText(dir.file("model.safetensors.index.json"), R"({"weight_map": {
      "model.norm.weight": "model-00002-of-00002.safetensors",
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors"}})");
  EXPECT_LOAD_ERROR(
      Checkpoint::open(dir.path()),
      "weight_map says tensor 'model.norm.weight' is in 'model-00002-of-00002.safetensors', but "
      "it is in '");
}

TEST(Checkpoint, TensorInTwoShards) {
  TempDir dir;
  writeSafeTensors(dir.file("a.safetensors"), {f32Tensor("w", {1})});
  writeSafeTensors(dir.file("b.safetensors"), {f32Tensor("w", {1}), f32Tensor("v", {1})});
  writeText(dir.file("model.safetensors.index.json"),
            R"({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()),
                    "model.safetensors.index.json: tensor 'w' is present in both '");
}

TEST(Checkpoint, ShardNamesMayNotEscapeTheFolder) {
  TempDir dir;
  writeText(dir.file("model.safetensors.index.json"),
            R"({"weight_map": {"w": "../x.safetensors"}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()),
                    "weight_map entry 'w': shard '../x.safetensors' escapes the checkpoint folder");
  writeText(dir.file("model.safetensors.index.json"),
            R"({"weight_map": {"w": "sub/../../x.safetensors"}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()), "escapes the checkpoint folder");
  writeText(dir.file("model.safetensors.index.json"), R"({"weight_map": {"w": "/etc/passwd"}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()), "shard '/etc/passwd' is an absolute path");
}

TEST(Checkpoint, MalformedIndex) {
  TempDir dir;
  std::string index = dir.file("model.safetensors.index.json");
  writeText(index, "{nope");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()), "model.safetensors.index.json: not valid JSON");
  writeText(index, R"({"metadata": {}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()), "expected a 'weight_map' object");
  writeText(index, R"({"weight_map": {}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()), "'weight_map' is empty");
  writeText(index, R"({"weight_map": {"w": 3}})");
  EXPECT_LOAD_ERROR(Checkpoint::open(dir.path()),
                    "weight_map entry 'w' must be a shard file name, found number");
}

} // namespace
} // namespace q3::runtime
