// What the audit keeps of a job after its tasks have ended (gpubind/audit_record.h): the node's
// record, step by step, and the job's AdminComment, node by node, beside other tools' text.
#include "gpubind/audit_record.h"

#include <gtest/gtest.h>

namespace gpubind::audit {
namespace {

StepAudit step(const std::string& name, std::map<Verdict, int> counts) {
  StepAudit out;
  out.job_id = "42";
  out.step = name;
  out.counts = std::move(counts);
  for (const auto& [verdict, count] : out.counts)
    for (int i = 0; i < count; ++i) {
      TaskAudit task;
      task.verdict = verdict;
      out.tasks.push_back(task);
    }
  return out;
}

TEST(AuditRecord, ALineNamesTheNodeAndTheStep) {
  EXPECT_EQ(record_line(step("0", {{Verdict::kAsPlanned, 2}}), "n1"),
            "n1: step 0: 2 tasks: 2 as-planned");
  // A node name is never taken for a delimiter of the comment.
  EXPECT_EQ(record_line(step("1", {{Verdict::kRepinned, 1}}), "n{1}|x"),
            "n_1__x: step 1: 1 task: 1 re-pinned");
}

TEST(AuditRecord, ANewReadingReplacesItsStepsAndKeepsThoseThatEnded) {
  const std::string first =
      merge_record("", {"n1: step 0: 2 tasks: 2 as-planned", "n1: step batch: 1 task: 1 unknown"});
  EXPECT_EQ(first, "n1: step 0: 2 tasks: 2 as-planned\nn1: step batch: 1 task: 1 unknown\n");
  // Step 0 ended; step 10 and 2 started; batch moved a thread: numbered steps in number order.
  EXPECT_EQ(
      merge_record(first, {"n1: step 10: 1 task: 1 as-planned", "n1: step 2: 1 task: 1 as-planned",
                           "n1: step batch: 1 task: 1 re-pinned"}),
      "n1: step 0: 2 tasks: 2 as-planned\nn1: step 2: 1 task: 1 as-planned\n"
      "n1: step 10: 1 task: 1 as-planned\nn1: step batch: 1 task: 1 re-pinned\n");
  // Lines of another form (a damaged file) are dropped, never kept half.
  EXPECT_EQ(merge_record("garbage\nn1: step : x\n", {}), "");
}

TEST(AuditRecord, EachNodeAddsItsEntryAndKeepsWhatOthersWrote) {
  const std::string record_n1 =
      "n1: step 0: 2 tasks: 2 as-planned\nn1: step 1: 1 task: 1 re-pinned\n";
  const std::string first = merge_admin_comment("", record_n1);
  EXPECT_EQ(first, "gpubind{n1: step 0: 2 tasks: 2 as-planned / step 1: 1 task: 1 re-pinned}");
  const std::string second =
      merge_admin_comment(first, "n2: step 0: 2 tasks: 1 as-planned, 1 unbound-far\n");
  EXPECT_EQ(second,
            "gpubind{n1: step 0: 2 tasks: 2 as-planned / step 1: 1 task: 1 re-pinned | n2: step "
            "0: 2 tasks: 1 as-planned, 1 unbound-far}");
  // A node's second epilog replaces its entry; another tool's text around it stays.
  EXPECT_EQ(
      merge_admin_comment("JS1:abc " + second + " tail", "n2: step 0: 2 tasks: 2 as-planned\n"),
      "JS1:abc gpubind{n1: step 0: 2 tasks: 2 as-planned / step 1: 1 task: 1 re-pinned | "
      "n2: step 0: 2 tasks: 2 as-planned} tail");
  EXPECT_EQ(merge_admin_comment("JS1:abc", "n1: step 0: 1 task: 1 as-planned\n"),
            "JS1:abc gpubind{n1: step 0: 1 task: 1 as-planned}");
}

TEST(AuditRecord, TheCommentStaysBoundedOnHugeJobs) {
  std::string comment;
  for (int n = 0; n < 2000; ++n)
    comment = merge_admin_comment(
        comment, "node" + std::to_string(10000 + n) + ": step 0: 8 tasks: 8 as-planned\n");
  EXPECT_LE(comment.size(), kAdminCommentLimit);
  const size_t hidden = comment.find(" nodes not shown}");
  ASSERT_NE(hidden, std::string::npos) << comment.substr(comment.size() - 80);
  // Every node is either shown or counted.
  int shown = 0;
  for (size_t at = 0; (at = comment.find(": step 0", at)) != std::string::npos; ++at)
    ++shown;
  const size_t plus = comment.rfind('+');
  EXPECT_EQ(shown + std::stoi(comment.substr(plus + 1)), 2000);
  // One node's many steps are cut, not dropped.
  std::string many;
  for (int s = 0; s < 200; ++s)
    many += "n1: step " + std::to_string(s) + ": 1 task: 1 unknown\n";
  const std::string cut = merge_admin_comment("", many);
  EXPECT_LE(cut.size(), kNodeEntryLimit + 10);
  EXPECT_NE(cut.find("...}"), std::string::npos);
}

}  // namespace
}  // namespace gpubind::audit
