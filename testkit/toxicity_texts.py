"""Texts written for the toxicity tests and bench/classifiers/toxicity.py: clearly toxic, clearly clean, hard negatives.

Written for this project (no third-party data), in three groups:
- TOXIC: insults, abusive profanity aimed at a person, threats; short comments and longer rants
  (several paragraphs), because the scorer must work on documents, not only on one-liners.
  No slurs against groups: abuse without them is enough to test, and the file stays readable.
- CLEAN: ordinary web prose (recipes, help forums, sports, travel, reviews), short and long.
- HARD_NEGATIVES: text that is not toxic but contains the words a bag-of-words model keys on:
  medical text about genitals and sexually transmitted diseases, history of wars and genocide,
  dictionary entries for swear words, news about a court case quoting an insult, animal breeding
  ("bitch"), a rooster ("cock"), a donkey ("ass"), a place name (Scunthorpe), a person named Dick.
  They are labelled 0 (not toxic): a data filter that removes them removes medicine and history.

`labelled()` gives every text with its label (1 toxic, 0 otherwise) and its group.
`training_texts()` is separate training data for `train-toxicity` (insults against sentences about
places, from templates): none of its lines is one of the evaluation texts above.
"""

from __future__ import annotations

import itertools

TOXIC: list[str] = [
    "You are a fucking idiot and everyone here knows it.",
    "Shut up, you pathetic loser. Nobody asked for your stupid opinion.",
    "What a worthless piece of shit you are. Go crawl back under your rock.",
    "I swear I will find where you live and make you regret every word you wrote.",
    "You dumb bitch, read the article before you comment, or just shut your mouth.",
    "This moron has no idea what he's talking about. Absolute brainless asshole.",
    "Fuck off and die. Seriously, the world would be better without trash like you.",
    "Keep talking and I'll break your jaw, you little coward.",
    "You're a disgusting, lying scumbag and your mother should be ashamed of you.",
    "lol you are so ugly and stupid, kill yourself already",
    "Another garbage post from the biggest dickhead on this forum. Get lost, clown.",
    "Listen here you ignorant twat, nobody wants your crap on this page.",
    "Go to hell, you fat useless slob. You make me sick.",
    "I hope someone beats the hell out of you, you deserve every bit of it.",
    "Your code is shit and you are shit. Quit before you embarrass yourself even more, dumbass.",
    # Longer rants: several sentences, not every one of them abusive.
    "I read your so-called review of the restaurant. Let me tell you something. You are a clueless, "
    "arrogant jerk who wouldn't know good food if it hit you in your stupid face. The owners work "
    "fourteen hours a day and some spoiled idiot like you trashes them for fun. Do everyone a favour "
    "and shut the fuck up.",
    "To the guy who keeps parking across my driveway: I know it's you. You are a selfish prick and "
    "a lazy piece of garbage.\n\nIf I see your car there one more time I will smash every window in "
    "it, and then I'll come for you. Don't test me, you fucking rat.",
    "Wow. Just wow. Every single thing you write is moronic. You are the dumbest person I have ever "
    "had the misfortune of reading. Your arguments are crap, your spelling is crap, and your "
    "personality is crap. Nobody likes you, nobody respects you, and frankly nobody would notice if "
    "you disappeared. Pathetic.",
    "Thread: Moderator decision on the ban\n\nReply from user77: The mods here are spineless idiots "
    "and power-tripping losers. Ban me, I don't give a shit.\n\nReply from user77: And you, the admin, "
    "are the biggest asshole of them all. Stupid bastard. I hope your miserable site burns to the "
    "ground.\n\nReply from user77: Go fuck yourselves, all of you.",
    "Hey loser. Yeah, you. Everybody at school laughs at you behind your back. You're ugly, you smell, "
    "and you're too stupid to notice. Do us all a favour and stop showing up, freak. If you tell "
    "anyone about this message we'll make your life even worse.",
]

CLEAN: list[str] = [
    "The weather should stay dry through the weekend, with highs around 22 degrees on Saturday.",
    "Preheat the oven to 180 C. Mix the flour, sugar and butter until crumbly, then press into the tin.",
    "Thanks for the quick reply! Reinstalling the driver fixed the audio problem on my laptop.",
    "The library will be closed on Monday for the public holiday and reopens Tuesday at 9 am.",
    "Our hiking group meets at the trailhead car park at 8. Bring water, sunscreen and a light jacket.",
    "The new update improves battery life and adds a dark mode to the settings menu.",
    "She scored twice in the second half as the home side came from behind to win 3-2.",
    "I planted tomatoes and basil this spring, and the harvest has been better than last year.",
    "Please remember to submit your timesheets by Friday so payroll can process them on time.",
    "The museum's new exhibition brings together landscape paintings from the nineteenth century.",
    "This blender is quiet, easy to clean, and handles frozen fruit without any trouble. Five stars.",
    "To reset your password, click 'Forgot password' on the sign-in page and follow the email link.",
    "The train from Vienna to Salzburg takes about two and a half hours and runs every hour.",
    "Kids loved the science fair: the volcano model and the solar oven were the most popular projects.",
    "Cats sleep between twelve and sixteen hours a day, mostly in short naps.",
    # Longer documents.
    "Getting started with sourdough\n\nA sourdough starter is a mixture of flour and water that hosts "
    "wild yeast and lactic acid bacteria. Feed it equal weights of flour and water once a day, and "
    "keep it somewhere warm. After about a week it should double in size within a few hours of "
    "feeding.\n\nWhen it does, mix 100 g of active starter with 350 g of water and 500 g of bread "
    "flour, rest for an hour, then add 10 g of salt. Fold the dough every half hour for two hours, "
    "shape it, and let it rise overnight in the fridge. Bake in a covered pot at 240 C for twenty "
    "minutes, then uncovered until the crust is deep brown.",
    "Council approves new cycle lanes\n\nThe city council voted on Tuesday to build protected cycle "
    "lanes along the river road. The project, which will cost an estimated 4.2 million, is expected "
    "to begin next spring and take eighteen months.\n\nSupporters said the lanes would make cycling "
    "safer for commuters and schoolchildren. Several shop owners raised concerns about parking and "
    "deliveries; the council agreed to add loading bays at four points along the route.",
    "Review: a cosy little cafe by the station. The coffee is excellent, the staff are friendly and "
    "the cinnamon buns are still warm at ten in the morning. It gets busy at lunchtime, so come early "
    "if you want a table by the window. Prices are fair for the area. We will definitely be back "
    "next time we pass through town.",
    "How to replace a bicycle inner tube: shift to the smallest cog, open the brake, and remove the "
    "wheel. Use tyre levers to lift one side of the tyre off the rim and pull out the old tube. Check "
    "the inside of the tyre for thorns or glass. Put a little air into the new tube, tuck it in, "
    "seat the tyre bead by hand, and inflate to the pressure printed on the sidewall.",
    "Annual report of the garden club\n\nThis year we welcomed fourteen new members and held nine "
    "workshops, from pruning fruit trees to saving seeds. The spring plant sale raised enough to "
    "repair the greenhouse roof.\n\nOur thanks go to the volunteers who kept the community beds "
    "watered through the July heatwave. Next year we plan a pollinator meadow beside the school.",
]

HARD_NEGATIVES: list[str] = [
    # Medical.
    "Syphilis is a sexually transmitted infection caused by Treponema pallidum. The first sign is "
    "usually a painless sore on the penis, vagina, anus or mouth. It is treated with penicillin.",
    "Testicular cancer is most common in men aged 15 to 35. Check the testicles once a month for "
    "lumps or swelling, and see a doctor if anything changes in the scrotum.",
    "Chlamydia and gonorrhoea often cause no symptoms, so anyone who is sexually active should be "
    "tested regularly. Condoms reduce the risk of transmission during vaginal, anal and oral sex.",
    "After childbirth, the vagina and perineum may be sore for several weeks. Pelvic floor exercises "
    "help the muscles around the bladder, vagina and anus recover.",
    "Erectile dysfunction is the persistent inability to get or keep an erection firm enough for "
    "sex. Causes include heart disease, diabetes, some medications and stress.",
    # History.
    "During the Rwandan genocide of 1994, an estimated 500,000 to 800,000 people were murdered in "
    "about one hundred days. Militias killed men, women and children with machetes and guns.",
    "The Battle of the Somme was one of the bloodiest battles in history: on its first day alone "
    "the British Army suffered nearly 60,000 casualties, of whom more than 19,000 were killed.",
    "The Nazi regime murdered six million Jews in the Holocaust. Victims were shot in mass "
    "executions or killed in gas chambers at extermination camps such as Auschwitz and Treblinka.",
    "In 1572 the St. Bartholomew's Day massacre left thousands of Huguenots dead in Paris, and the "
    "killing spread to other French cities over the following weeks.",
    # Dictionary entries.
    "bastard (noun): 1. archaic: a person born of parents not married to each other. 2. vulgar "
    "slang: an unpleasant or despicable person. Origin: Middle English, via Old French.",
    "damn (verb): to condemn, especially to eternal punishment; (interjection) used to express "
    "anger or frustration. Usage note: considered mildly offensive in formal writing.",
    # News quoting an insult in a court case.
    "The court heard that the defendant shouted 'you stupid bitch' at the shop assistant before "
    "throwing a bottle. The judge fined him 500 pounds and ordered him to pay compensation.",
    "A man who called a police officer a 'fucking pig' during an arrest was found guilty of a public "
    "order offence on Thursday, magistrates said. His lawyer argued the words were spoken in panic.",
    # Ordinary meanings of words that are also insults.
    "Our champion Labrador bitch, Maisie, had a healthy litter of seven puppies this week; the sire "
    "is a working gundog from a neighbouring kennel.",
    "The cock crowed at dawn, waking the hens, while the farmer's old ass grazed in the paddock "
    "beside the barn.",
    "Scunthorpe United drew 1-1 with Grimsby Town, and manager Dick Evans praised the young "
    "defenders after the match.",
]


def labelled() -> list[tuple[str, int, str]]:
    """(text, label, group): 1 for TOXIC, 0 for CLEAN and HARD_NEGATIVES."""
    return (
        [(t, 1, "toxic") for t in TOXIC]
        + [(t, 0, "clean") for t in CLEAN]
        + [(t, 0, "hard_negative") for t in HARD_NEGATIVES]
    )


_INSULT_ADJ = ["stupid", "pathetic", "worthless", "disgusting", "ugly", "brainless", "useless", "fucking"]
_INSULT_NOUN = ["idiot", "moron", "loser", "jerk", "asshole", "piece of shit", "clown", "bastard"]
_PLACE_ADJ = ["new", "small", "friendly", "quiet", "old", "local", "bright", "busy"]
_PLACE_NOUN = ["library", "garden", "train station", "bakery", "museum", "park", "market", "school"]


def training_texts() -> tuple[list[str], list[str]]:
    """(toxic, clean): 64 template lines each, for a small train-toxicity model."""
    toxic = [
        f"you are a {a} {n}, shut up" if i % 2 else f"go to hell, you {a} {n}"
        for i, (a, n) in enumerate(itertools.product(_INSULT_ADJ, _INSULT_NOUN))
    ]
    clean = [
        f"the {a} {n} opens at nine on weekdays" if i % 2 else f"we visited the {a} {n} last weekend"
        for i, (a, n) in enumerate(itertools.product(_PLACE_ADJ, _PLACE_NOUN))
    ]
    return toxic, clean
